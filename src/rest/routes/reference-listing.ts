import type { FastifyReply } from "fastify";
import type { Reference, TaggedReference } from "../../domain/models.ts";
import type { ListReferencesInput } from "../../domain/references/reference-input.ts";
import type { Services } from "../../domain/services.ts";
import { pageQuery, splitRepeatedValues } from "../schemas.ts";
import { serializeReference } from "../serializers.ts";

/*
 * What the reference listings share (GET /v1/references, GET /v1/tags/{tagId}/references): the query, its
 * schema, its translation to the service's input, and references serialized with their tags.
 */

export interface ListReferencesQuery {
  limit: number;
  cursor?: string;
  tag_ids?: string[];
  tag_names?: string[];
  tag_match?: "all" | "any";
  exclude_tag_ids?: string[];
  exclude_tag_names?: string[];
  active?: boolean;
  carrier_code?: string;
  container_id?: string;
  bill_of_lading?: string;
  booking_number?: string;
  parent_reference_id?: string;
}

export const listReferencesQuerySchema = {
  type: "object",
  properties: {
    ...pageQuery,
    tag_ids: {
      type: "array",
      items: { type: "string" },
      description: "Tag ids; repeat the parameter (tag_ids=a&tag_ids=b) or separate with commas (tag_ids=a,b)",
    },
    tag_names: {
      type: "array",
      items: { type: "string" },
      description:
        "Tag names, matched case-insensitively; repeat the parameter for several (tag_names=a&tag_names=b). " +
        "Not split on commas: a name may contain one",
    },
    tag_match: {
      type: "string",
      enum: ["all", "any"],
      default: "all",
      description: "all: carries every listed tag; any: at least one",
    },
    exclude_tag_ids: {
      type: "array",
      items: { type: "string" },
      description:
        "Leave out references carrying any of these tags (unknown ids exclude nothing). Repeatable; " +
        "comma-separated lists are accepted too. Combines with tag_ids, tag_names and tag_match",
    },
    exclude_tag_names: {
      type: "array",
      items: { type: "string" },
      description:
        "Leave out references carrying any of the tags with these names, matched case-insensitively " +
        "(unknown names exclude nothing). Repeatable",
    },
    active: { type: "boolean", description: "true: only active references; false: only deactivated ones" },
    carrier_code: { type: "string", description: "Only references of this carrier (SCAC, any case)" },
    container_id: {
      type: "string",
      description: "Only the references of this container number (any case, spaces ignored)",
    },
    bill_of_lading: { type: "string", description: "Only the references of this bill of lading number" },
    booking_number: { type: "string", description: "Only the references of this booking number" },
    parent_reference_id: {
      type: "string",
      description: "Only the children of this bill of lading or booking reference (its id)",
    },
  },
} as const;

export function toListReferencesInput(query: ListReferencesQuery): ListReferencesInput {
  return {
    tagIds: splitRepeatedValues(query.tag_ids),
    tagNames: query.tag_names,
    tagMatch: query.tag_match,
    excludeTagIds: splitRepeatedValues(query.exclude_tag_ids),
    excludeTagNames: query.exclude_tag_names,
    active: query.active,
    carrierCode: query.carrier_code,
    containerId: query.container_id,
    billOfLading: query.bill_of_lading,
    bookingNumber: query.booking_number,
    parentReferenceId: query.parent_reference_id,
    limit: query.limit,
    cursor: query.cursor,
  };
}

/**
 * Serializes references with their tags: those the services read with them, or else loaded for the whole page
 * in one query.
 */
export async function serializeReferences(services: Services, references: readonly (Reference | TaggedReference)[]) {
  if (references.every((reference) => "tags" in reference)) {
    return references.map((reference) => serializeReference(reference, (reference as TaggedReference).tags));
  }
  const tagsByReference = await services.tags.tagsOfReferences(references.map((reference) => reference.id));
  return references.map((reference) => serializeReference(reference, tagsByReference.get(reference.id) ?? []));
}

export async function serializeOneReference(services: Services, reference: Reference | TaggedReference) {
  const [serialized] = await serializeReferences(services, [reference]);
  return serialized!;
}

/**
 * Sends a page of references (the ReferencePage schema) built from the JSON texts their rows keep (migration
 * 0013), joined by the database: no row is parsed, mapped or serialized on the way, which was most of a page's
 * cost (docs/decisions.md, "a page of references is its rows' stored JSON"). Bytes sent with a JSON content
 * type skip the route's serializer; the schema still documents the page, and the texts are serializeReference's.
 */
export async function sendReferencePage(
  reply: FastifyReply,
  services: Services,
  organizationId: string,
  input: ListReferencesInput,
): Promise<FastifyReply> {
  const page = await services.references.listReferenceJson(organizationId, input);
  // A cursor is base64url and a dot: nothing in it needs escaping.
  const end = page.nextCursor === null ? PAGE_END_WITHOUT_CURSOR : `],"next_cursor":"${page.nextCursor}"}`;
  const body = Buffer.concat([PAGE_START, page.json, Buffer.from(end)]);
  return reply.type("application/json; charset=utf-8").send(body);
}

const PAGE_START = Buffer.from(`{"data":[`);
const PAGE_END_WITHOUT_CURSOR = `],"next_cursor":null}`;
