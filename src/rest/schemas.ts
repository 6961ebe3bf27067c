import { DEACTIVATE_REASONS } from "../domain/lifecycle/lifecycle-event.ts";

/*
 * JSON Schemas shared by the REST routes. They validate requests and, through @fastify/swagger, are the
 * OpenAPI document: one definition serves both. Bodies are validated without type coercion and with unknown
 * fields rejected; query strings are coerced (they are text by nature).
 */

export const uuidParam = (name: string, description: string) => ({
  type: "object",
  properties: { [name]: { type: "string", description } },
  required: [name],
});

/** The request header every POST accepts; see src/rest/idempotency.ts. */
export const idempotencyKeyHeader = {
  type: "object",
  properties: {
    "idempotency-key": {
      type: "string",
      description:
        "1-255 characters. The same key with the same request within 24 hours replays the first response " +
        "(with Idempotent-Replayed: true) instead of acting twice",
    },
  },
} as const;

export const tagEntrySchema = {
  type: "object",
  description:
    'Exactly one of `{ "id": ... }` (an existing tag) or `{ "name": ... }` (found case-insensitively or created).',
  properties: {
    id: { type: "string", description: "An existing tag's id (UUID)" },
    name: {
      type: "string",
      description: "A tag name (1-100 characters after trimming and NFC normalization); created if no tag has it",
    },
  },
  additionalProperties: false,
  minProperties: 1,
  maxProperties: 1,
} as const;

export const tagsArraySchema = { type: "array", items: tagEntrySchema, description: "Tag entries" } as const;

export const pageQuery = {
  limit: { type: "integer", minimum: 1, maximum: 500, default: 50, description: "Page size, 1 to 500" },
  cursor: { type: "string", description: "The next_cursor of the previous page" },
} as const;

/**
 * A deactivation reason: a copy of the domain's list, so that the document and the rule cannot drift apart and
 * no schema compiler can change the domain's array.
 */
export const deactivateReasonSchema = { type: "string", enum: [...DEACTIVATE_REASONS] } as const;

/**
 * The values of a repeatable query parameter whose values never contain commas (ids, event types): each
 * occurrence may itself be a comma-separated list, so `?type=a&type=b` and `?type=a,b` mean the same. Names are
 * not split (a tag name may contain a comma); they are given once per occurrence.
 */
export function splitRepeatedValues(values: readonly string[] | undefined): string[] | undefined {
  return values
    ?.flatMap((value) => value.split(","))
    .map((value) => value.trim())
    .filter(Boolean);
}
