/* The building blocks of the response schemas (src/rest/response-schemas.ts explains the rules they keep). */

export const dateTime = { type: "string", format: "date-time", description: "ISO 8601, UTC, milliseconds" } as const;
export const nullableDateTime = {
  type: ["string", "null"],
  format: "date-time",
  description: "ISO 8601, UTC, milliseconds; null when unset",
} as const;
export const uuid = { type: "string", format: "uuid" } as const;
export const nullableUuid = { type: ["string", "null"], format: "uuid" } as const;
export const freeForm = { type: "object", additionalProperties: true } as const;

/** An object schema whose every property is required and which admits no other property. */
export function record(description: string, properties: Record<string, object>) {
  return {
    type: "object",
    description,
    properties,
    required: Object.keys(properties),
    additionalProperties: false,
  } as const;
}

export function page(description: string, itemRef: string) {
  return record(description, {
    data: { type: "array", items: { $ref: `${itemRef}#` } },
    next_cursor: {
      type: ["string", "null"],
      description: "Pass as `cursor` to read the next page; null on the last page",
    },
  });
}
