import { http } from "./http.ts";
import type { TestServer } from "./test-server.ts";

/*
 * One behaviour suite, two surfaces: each driver performs the same operations through REST or through
 * GraphQL and returns results in one neutral shape, so scenarios assert the behaviour, not the transport.
 */

export interface TagView {
  readonly id: string;
  readonly name: string;
}

export interface ReferenceView {
  readonly id: string;
  readonly containerId: string | null;
  readonly billOfLading: string | null;
  readonly bookingNumber: string | null;
  readonly carrierCode: string;
  readonly parentReferenceId: string | null;
  readonly active: boolean;
  readonly tags: readonly TagView[];
}

export type Outcome<T> =
  { ok: true; value: T } | { ok: false; code: string; fields: string[]; status?: number; body: unknown };

export interface Page<T> {
  readonly items: readonly T[];
  readonly nextCursor: string | null;
}

export interface ReferenceFilter {
  readonly tagIds?: readonly string[];
  readonly tagNames?: readonly string[];
  readonly tagMatch?: "all" | "any";
  readonly excludeTagIds?: readonly string[];
  readonly excludeTagNames?: readonly string[];
  readonly active?: boolean;
  readonly carrierCode?: string;
  readonly containerId?: string;
  readonly billOfLading?: string;
  readonly parentReferenceId?: string;
}

export interface CreateReference {
  readonly containerId?: string;
  readonly billOfLading?: string;
  readonly bookingNumber?: string;
  readonly carrierCode?: string;
  readonly tags?: readonly unknown[];
}

export interface Driver {
  readonly surface: "rest" | "graphql";
  createTag(name: string): Promise<Outcome<TagView>>;
  getTag(id: string): Promise<Outcome<TagView>>;
  listTags(options: { namePrefix?: string; limit?: number; cursor?: string }): Promise<Outcome<Page<TagView>>>;
  renameTag(id: string, name: string): Promise<Outcome<TagView>>;
  deleteTag(id: string): Promise<Outcome<true>>;
  createReference(input: CreateReference): Promise<Outcome<ReferenceView>>;
  getReference(id: string): Promise<Outcome<ReferenceView>>;
  listReferences(
    filter: ReferenceFilter,
    options?: { limit?: number; cursor?: string },
  ): Promise<Outcome<Page<ReferenceView>>>;
  listTagReferences(
    tagId: string,
    options?: { limit?: number; cursor?: string },
  ): Promise<Outcome<Page<ReferenceView>>>;
  addTags(referenceId: string, tags: readonly unknown[]): Promise<Outcome<readonly TagView[]>>;
  removeTag(referenceId: string, tagId: string): Promise<Outcome<true>>;
}

const camel = (segment: string) => segment.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());

function restFailure(status: number, body: any): Outcome<never> {
  const fields = ((body?.errors ?? []) as { pointer: string }[]).map((error) =>
    error.pointer.replace(/^\//, "").split("/").map(camel).join("."),
  );
  return { ok: false, code: body?.code ?? `HTTP_${status}`, fields, status, body };
}

function restTag(body: any): TagView {
  return { id: body.id, name: body.name };
}

function restReference(body: any): ReferenceView {
  return {
    id: body.id,
    containerId: body.container_id,
    billOfLading: body.bill_of_lading,
    bookingNumber: body.booking_number,
    carrierCode: body.carrier_code,
    parentReferenceId: body.parent_reference_id,
    active: body.active,
    tags: body.tags.map(restTag),
  };
}

function query(params: Record<string, string | number | boolean | readonly string[] | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const item of value) search.append(key, item);
    else search.append(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

export function restDriver(server: Pick<TestServer, "url" | "apiKey">): Driver {
  const call = async <T>(
    method: string,
    path: string,
    ok: number,
    map: (body: any) => T,
    body?: unknown,
  ): Promise<Outcome<T>> => {
    const result = await http(server, method, path, { body });
    return result.status === ok ? { ok: true, value: map(result.body) } : restFailure(result.status, result.body);
  };
  const page = (body: any): Page<ReferenceView> => ({
    items: body.data.map(restReference),
    nextCursor: body.next_cursor,
  });
  return {
    surface: "rest",
    createTag: (name) => call("POST", "/v1/tags", 201, restTag, { name }),
    getTag: (id) => call("GET", `/v1/tags/${id}`, 200, restTag),
    listTags: ({ namePrefix, limit, cursor }) =>
      call("GET", `/v1/tags${query({ name_prefix: namePrefix, limit, cursor })}`, 200, (body) => ({
        items: body.data.map(restTag),
        nextCursor: body.next_cursor,
      })),
    renameTag: (id, name) => call("PATCH", `/v1/tags/${id}`, 200, restTag, { name }),
    deleteTag: (id) => call("DELETE", `/v1/tags/${id}`, 204, () => true as const),
    createReference: (input) =>
      call("POST", "/v1/references", 201, (body) => restReference(body.reference), {
        container_id: input.containerId,
        bill_of_lading: input.billOfLading,
        booking_number: input.bookingNumber,
        carrier_code: input.carrierCode,
        tags: input.tags,
      }),
    getReference: (id) => call("GET", `/v1/references/${id}`, 200, restReference),
    listReferences: (filter, options = {}) =>
      call(
        "GET",
        `/v1/references${query({
          tag_ids: filter.tagIds,
          tag_names: filter.tagNames,
          tag_match: filter.tagMatch,
          exclude_tag_ids: filter.excludeTagIds,
          exclude_tag_names: filter.excludeTagNames,
          active: filter.active,
          carrier_code: filter.carrierCode,
          container_id: filter.containerId,
          bill_of_lading: filter.billOfLading,
          parent_reference_id: filter.parentReferenceId,
          limit: options.limit,
          cursor: options.cursor,
        })}`,
        200,
        page,
      ),
    listTagReferences: (tagId, options = {}) =>
      call("GET", `/v1/tags/${tagId}/references${query({ limit: options.limit, cursor: options.cursor })}`, 200, page),
    addTags: (referenceId, tags) =>
      call("POST", `/v1/references/${referenceId}/tags`, 200, (body) => body.tags.map(restTag), { tags }),
    removeTag: (referenceId, tagId) =>
      call("DELETE", `/v1/references/${referenceId}/tags/${tagId}`, 204, () => true as const),
  };
}
