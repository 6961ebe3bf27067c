import type { Outcome, Page } from "./drivers.ts";
import { http } from "./http.ts";
import type { TestServer } from "./test-server.ts";

/*
 * The lifecycle operations of the scenario suite through REST or GraphQL, in one neutral shape:
 * snake_case values as REST writes them (`deactivate_reason: "data_not_found"`), camelCase field names.
 */

export interface LifecycleReferenceView {
  readonly id: string;
  readonly active: boolean;
  readonly deactivateReason: string | null;
  readonly autoUnsubscribed: boolean;
  readonly lastUpdateStatus: string | null;
  readonly consecutiveFailures: number;
  readonly estimatedArrival: string | null;
  readonly parentReferenceId: string | null;
  readonly containerId: string | null;
  readonly tags: readonly { id: string; name: string }[];
}

export interface EventView {
  readonly id: string;
  readonly type: string;
  readonly detail: Record<string, unknown>;
}

export interface EventQuery {
  readonly types?: readonly string[];
  readonly limit?: number;
  readonly cursor?: string;
}

export interface LifecycleDriver {
  readonly surface: "rest" | "graphql";
  createParent(billOfLading: string, tags?: readonly unknown[]): Promise<Outcome<LifecycleReferenceView>>;
  recordExtraction(referenceId: string, outcome: Record<string, unknown>): Promise<Outcome<LifecycleReferenceView>>;
  recordUpdate(referenceId: string, document: Record<string, unknown>): Promise<Outcome<{ id: string }>>;
  reportChildren(referenceId: string, containerIds: readonly string[]): Promise<Outcome<LifecycleReferenceView[]>>;
  deactivate(referenceId: string, reason: string): Promise<Outcome<LifecycleReferenceView>>;
  reactivate(referenceId: string): Promise<Outcome<LifecycleReferenceView>>;
  listEvents(referenceId: string, query?: EventQuery): Promise<Outcome<Page<EventView>>>;
}

function restFailure(status: number, body: any): Outcome<never> {
  const fields = ((body?.errors ?? []) as { pointer: string }[]).map((error) =>
    error.pointer
      .replace(/^\//, "")
      .split("/")
      .map((segment) => segment.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase()))
      .join("."),
  );
  return { ok: false, code: body?.code ?? `HTTP_${status}`, fields, status, body };
}

function restReference(body: any): LifecycleReferenceView {
  return {
    id: body.id,
    active: body.active,
    deactivateReason: body.deactivate_reason,
    autoUnsubscribed: body.auto_unsubscribed,
    lastUpdateStatus: body.last_update_status,
    consecutiveFailures: body.consecutive_failures,
    estimatedArrival: body.estimated_arrival,
    parentReferenceId: body.parent_reference_id,
    containerId: body.container_id,
    tags: body.tags.map((tag: any) => ({ id: tag.id, name: tag.name })),
  };
}

export function restLifecycleDriver(server: Pick<TestServer, "url" | "apiKey">): LifecycleDriver {
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
  const references = "/v1/references";
  return {
    surface: "rest",
    createParent: (billOfLading, tags) =>
      call("POST", references, 201, (body) => restReference(body.reference), {
        bill_of_lading: billOfLading,
        carrier_code: "MAEU",
        tags,
      }),
    recordExtraction: (id, outcome) => call("POST", `${references}/${id}/extractions`, 201, restReference, outcome),
    recordUpdate: (id, document) =>
      call("POST", `${references}/${id}/updates`, 201, (body) => ({ id: body.id }), document),
    reportChildren: (id, containerIds) =>
      call("POST", `${references}/${id}/children`, 200, (body) => body.data.map(restReference), {
        container_ids: containerIds,
      }),
    deactivate: (id, reason) => call("POST", `${references}/${id}/deactivate`, 200, restReference, { reason }),
    reactivate: (id) => call("POST", `${references}/${id}/reactivate`, 200, restReference),
    listEvents: (id, query = {}) => {
      const search = new URLSearchParams();
      if (query.types) search.set("type", query.types.join(","));
      if (query.limit !== undefined) search.set("limit", String(query.limit));
      if (query.cursor) search.set("cursor", query.cursor);
      return call("GET", `${references}/${id}/events?${search}`, 200, (body) => ({
        items: body.data.map((event: any) => ({ id: event.id, type: event.type, detail: event.detail })),
        nextCursor: body.next_cursor,
      }));
    },
  };
}

const REFERENCE_FIELDS = `id active deactivateReason autoUnsubscribed lastUpdateStatus consecutiveFailures
  estimatedArrival containerId parent { id } tags { id name }`;

const lower = (value: string | null | undefined) => (value ? value.toLowerCase() : null);
const upper = (value: unknown) => (typeof value === "string" ? value.toUpperCase() : value);

function graphqlReference(node: any): LifecycleReferenceView {
  return {
    id: node.id,
    active: node.active,
    deactivateReason: lower(node.deactivateReason),
    autoUnsubscribed: node.autoUnsubscribed,
    lastUpdateStatus: lower(node.lastUpdateStatus),
    consecutiveFailures: node.consecutiveFailures,
    estimatedArrival: node.estimatedArrival,
    parentReferenceId: node.parent?.id ?? null,
    containerId: node.containerId,
    tags: node.tags,
  };
}

function graphqlFailure(body: { errors?: any[] }): Outcome<never> {
  const error = body.errors?.[0];
  const fields = (body.errors ?? []).flatMap((e) => {
    const issues = (e.extensions?.issues ?? []) as { field?: string }[];
    const field = typeof e.extensions?.field === "string" ? [e.extensions.field as string] : [];
    return [...field, ...issues.flatMap((issue) => (issue.field ? [issue.field] : []))].map((path) =>
      path.replace(/^input\./, ""),
    );
  });
  return { ok: false, code: error?.extensions?.code ?? "UNKNOWN", fields, body };
}

export function graphqlLifecycleDriver(server: Pick<TestServer, "url" | "apiKey">): LifecycleDriver {
  const run = async <T>(
    query: string,
    variables: Record<string, unknown>,
    pick: (data: any) => T | null,
  ): Promise<Outcome<T>> => {
    const response = await fetch(`${server.url}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": server.apiKey },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json()) as { data?: any; errors?: any[] };
    if (body.errors?.length) return graphqlFailure(body);
    const value = pick(body.data);
    if (value === null) return { ok: false, code: "NOT_FOUND", fields: [], body };
    return { ok: true, value };
  };
  const mutation = (name: string, input: string, selection: string) =>
    `mutation($input: ${input}!) { ${name}(input: $input) { ${selection} } }`;
  return {
    surface: "graphql",
    createParent: (billOfLading, tags) =>
      run(
        mutation("createReference", "CreateReferenceInput", `reference { ${REFERENCE_FIELDS} }`),
        { input: { billOfLading, carrierCode: "MAEU", tags } },
        (d) => graphqlReference(d.createReference.reference),
      ),
    recordExtraction: (referenceId, outcome) =>
      run(
        mutation("recordExtraction", "RecordExtractionInput", `reference { ${REFERENCE_FIELDS} }`),
        { input: { referenceId, ...outcome, status: upper(outcome.status) } },
        (d) => graphqlReference(d.recordExtraction.reference),
      ),
    recordUpdate: (referenceId, update) =>
      run(
        mutation("recordReferenceUpdate", "RecordReferenceUpdateInput", "update { id }"),
        { input: { referenceId, update } },
        (d) => ({ id: d.recordReferenceUpdate.update.id }),
      ),
    reportChildren: (referenceId, containerIds) =>
      run(
        mutation("reportChildContainers", "ReportChildContainersInput", `children { ${REFERENCE_FIELDS} }`),
        { input: { referenceId, containerIds } },
        (d) => d.reportChildContainers.children.map(graphqlReference),
      ),
    deactivate: (referenceId, reason) =>
      run(
        mutation("deactivateReference", "DeactivateReferenceInput", `reference { ${REFERENCE_FIELDS} }`),
        { input: { referenceId, reason: upper(reason) } },
        (d) => graphqlReference(d.deactivateReference.reference),
      ),
    reactivate: (referenceId) =>
      run(
        mutation("reactivateReference", "ReactivateReferenceInput", `reference { ${REFERENCE_FIELDS} }`),
        { input: { referenceId } },
        (d) => graphqlReference(d.reactivateReference.reference),
      ),
    listEvents: (id, query = {}) =>
      run(
        `query($id: ID!, $first: Int, $after: String, $filter: LifecycleEventFilter) {
          reference(id: $id) {
            events(first: $first, after: $after, filter: $filter) {
              edges { node { id type detail } } pageInfo { hasNextPage endCursor }
            }
          }
        }`,
        {
          id,
          first: query.limit,
          after: query.cursor,
          filter: query.types ? { types: query.types.map(upper) } : undefined,
        },
        (d) =>
          d.reference && {
            items: d.reference.events.edges.map((edge: any) => ({ ...edge.node, type: lower(edge.node.type) })),
            nextCursor: d.reference.events.pageInfo.hasNextPage ? d.reference.events.pageInfo.endCursor : null,
          },
      ),
  };
}
