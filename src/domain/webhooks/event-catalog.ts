import { EVENT_TYPE_DESCRIPTIONS, type JsonSchema } from "../lifecycle/event-detail-schemas.ts";
import { LIFECYCLE_EVENT_TYPES, type LifecycleEventType } from "../lifecycle/lifecycle-event.ts";

/*
 * The event catalog (SPEC §9.3): for every lifecycle event type, the JSON Schema of the webhook body a receiver
 * gets (webhook-body.ts builds it), with the type's `detail` schema as its `payload`. `GET /v1/event-types` serves
 * it as is, and the OpenAPI document's `webhooks` section is made from it, so the two cannot disagree.
 * Test events (`webhook_test`) are not lifecycle events and are not in the catalog.
 */

export interface EventCatalogEntry {
  readonly type: LifecycleEventType;
  readonly description: string;
  /** The JSON Schema (draft 2020-12) of the body delivered for this type. */
  readonly schema: JsonSchema;
}

const uuid = { type: "string", format: "uuid" } as const;

/** The body of SPEC §9 for one type: a closed envelope around the type's `detail`. */
export function deliveredBodySchema(type: LifecycleEventType): JsonSchema {
  const { description, detail } = EVENT_TYPE_DESCRIPTIONS[type];
  const properties = {
    id: { ...uuid, description: "The event's id (stable across retries and re-sends)" },
    type: { type: "string", const: type },
    occurred_at: { type: "string", format: "date-time", description: "When the event was written (ISO 8601, UTC)" },
    reference_id: { ...uuid, description: "The reference the event is about" },
    organization_id: { ...uuid, description: "The reference's organization" },
    reference_tags: {
      type: "array",
      description: "The reference's tags when the event was written (empty when none)",
      items: {
        type: "object",
        properties: { id: { ...uuid, description: "Tag id" }, name: { type: "string", description: "Tag name" } },
        required: ["id", "name"],
        additionalProperties: false,
      },
    },
    status: { type: "string", const: "data_received" },
    payload: { ...detail, description: "The event's `detail`, as in the lifecycle log" },
  };
  return {
    title: `${type} webhook body`,
    description,
    type: "object",
    properties,
    required: Object.keys(properties),
    additionalProperties: false,
  };
}

/** Every event type, in the order of LIFECYCLE_EVENT_TYPES. */
export const EVENT_CATALOG: readonly EventCatalogEntry[] = LIFECYCLE_EVENT_TYPES.map((type) => ({
  type,
  description: EVENT_TYPE_DESCRIPTIONS[type].description,
  schema: deliveredBodySchema(type),
}));
