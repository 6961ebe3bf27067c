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

export const tagEntrySchema = {
  type: "object",
  description:
    'Exactly one of `{ "id": ... }` (an existing tag) or `{ "name": ... }` (found case-insensitively or created).',
  properties: {
    id: { type: "string", format: "uuid", description: "An existing tag's id" },
    name: { type: "string", minLength: 1, maxLength: 100, description: "A tag name; created if no tag has it" },
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

export const deactivateReasonSchema = {
  type: "string",
  enum: [
    "customer_unsubscribed",
    "carrier_not_found",
    "data_not_found",
    "container_removed_from_bol",
    "exceeded_extraction_attempt_threshold",
    "inferred_shipment_completion",
    "newer_data_found_on_another_carrier",
  ],
} as const;

export const problemResponse = {
  description: "RFC 9457 problem details (application/problem+json)",
  type: "object",
  additionalProperties: true,
  properties: {
    type: { type: "string" },
    title: { type: "string" },
    status: { type: "integer" },
    detail: { type: "string" },
    code: { type: "string" },
    errors: {
      type: "array",
      items: {
        type: "object",
        properties: { pointer: { type: "string" }, code: { type: "string" }, message: { type: "string" } },
      },
    },
  },
} as const;
