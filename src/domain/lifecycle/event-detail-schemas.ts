import { DEACTIVATE_REASONS, type LifecycleEventType } from "./lifecycle-event.ts";

/*
 * The lifecycle log's vocabulary as data: for each event type, what it means and the JSON Schema of its `detail`
 * (the TypeScript union in lifecycle-event.ts, written as JSON Schema, draft 2020-12 / OpenAPI 3.1). Every surface
 * that describes an event reuses these: the webhook event catalog, the OpenAPI `webhooks` section, and the GraphQL
 * enum's descriptions (a test holds them equal). Plain objects, so the domain needs no schema library; the
 * `Record` over every type makes a new type without a schema a compile error.
 *
 * A detail is closed (`additionalProperties: false`): a key the recorder adds without a schema fails the catalog
 * tests. Only the update document inside `reference_update_created` is open: it is the tracking pipeline's JSON.
 */

/** A JSON Schema, as a plain object. */
export type JsonSchema = { readonly [keyword: string]: unknown };

export interface EventTypeDescription {
  /** What happened, and which facts `detail` holds (the GraphQL enum value says the same). */
  readonly description: string;
  readonly detail: JsonSchema;
}

const uuid = { type: "string", format: "uuid" } as const;
const nullableDateTime = {
  type: ["string", "null"],
  format: "date-time",
  description: "ISO 8601, UTC, milliseconds; null when unset",
} as const;

/** A closed object: every listed key is present, no other key is. Each detail names its reference and organization. */
function detail(description: string, properties: Record<string, JsonSchema>): JsonSchema {
  const all = {
    reference_id: { ...uuid, description: "The reference the event is about" },
    organization_id: { ...uuid, description: "The reference's organization" },
    ...properties,
  };
  return { type: "object", description, properties: all, required: Object.keys(all), additionalProperties: false };
}

function estimateChange(what: "departure" | "arrival"): EventTypeDescription {
  return {
    description: `The estimated ${what} changed. \`detail\`: \`previous\`, \`current\`.`,
    detail: detail(`The estimated ${what} before and after the update that changed it`, {
      previous: { ...nullableDateTime, description: `The estimated ${what} before; null when there was none` },
      current: { ...nullableDateTime, description: `The estimated ${what} now; null when the update cleared it` },
    }),
  };
}

export const EVENT_TYPE_DESCRIPTIONS: Readonly<Record<LifecycleEventType, EventTypeDescription>> = {
  reference_created: {
    description:
      "The reference was created. `detail`: `identifier_type`, `identifier_value`, `carrier_scac`, " +
      "`parent_reference_id`.",
    detail: detail("How the reference was created", {
      identifier_type: { type: "string", enum: ["container", "bill_of_lading", "booking_number"] },
      identifier_value: { type: "string", description: "The container number, bill of lading or booking number" },
      carrier_scac: { type: "string", description: "The carrier's SCAC, upper-case" },
      parent_reference_id: {
        type: ["string", "null"],
        format: "uuid",
        description: "The bill of lading or booking the container was found on; null for a reference created directly",
      },
    }),
  },
  reference_deactivated: {
    description: "The reference was deactivated. `detail`: `deactivate_reason`, `auto_unsubscribed`.",
    detail: detail("Why the reference was deactivated", {
      deactivate_reason: { type: "string", enum: [...DEACTIVATE_REASONS] },
      auto_unsubscribed: { type: "boolean", description: "true when the service deactivated it by itself" },
    }),
  },
  reference_reactivated: {
    description: "The reference was reactivated.",
    detail: detail("Nothing beyond the reference and its organization", {}),
  },
  reference_update_created: {
    description: "An update document was recorded. `detail`: `reference_update_id`, `update`.",
    detail: detail("The update document recorded", {
      reference_update_id: { ...uuid, description: "The stored update's id" },
      update: {
        type: "object",
        // Open, and said so: a generator reads a bare `type: object` as an object with no keys (openapi-typescript
        // makes it Record<string, never>), and a real update document would not compile against it.
        additionalProperties: true,
        description:
          "The update document as stored: any JSON object of the tracking pipeline, with optional " +
          "`estimated_departure` and `estimated_arrival`",
      },
    }),
  },
  extraction_succeeded: {
    description: "An extraction succeeded. `detail`: `status`.",
    detail: detail("An extraction outcome", { status: { type: "string", const: "succeeded" } }),
  },
  extraction_failed: {
    description: "An extraction failed. `detail`: `status`, `error { code message }`, `consecutive_failures`.",
    detail: detail("An extraction outcome", {
      status: { type: "string", const: "failed" },
      error: {
        type: "object",
        description: "The error the tracking pipeline reported",
        properties: { code: { type: "string" }, message: { type: "string" } },
        required: ["code", "message"],
        additionalProperties: false,
      },
      consecutive_failures: {
        type: "integer",
        minimum: 1,
        description: "Failed extractions since the last success, this one included",
      },
    }),
  },
  estimated_departure_changed: estimateChange("departure"),
  estimated_arrival_changed: estimateChange("arrival"),
};
