import { LIFECYCLE_EVENT_TYPES } from "../domain/lifecycle/lifecycle-event.ts";
import { WEBHOOK_SIGNINGS } from "../domain/webhooks/signing-keys.ts";
import {
  DELIVERY_STATUSES,
  DROPPED_REASONS,
  HELD_BACK_REASONS,
  TAG_FILTER_STATES,
  WEBHOOK_ORDERINGS,
} from "../domain/webhooks/webhook-models.ts";
import { dateTime, freeForm, nullableDateTime, page, record, uuid } from "./response-schema-parts.ts";

/* The webhook components of the /v1 response schemas: endpoints, deliveries, attempts, recovery and ordering. */

const webhookEndpointProperties = {
  id: { ...uuid, description: "Endpoint id" },
  url: {
    type: ["string", "null"],
    description: "Where deliveries are POSTed; null when they are published to a message broker (destination)",
  },
  destination: {
    type: ["object", "null"],
    description:
      "The message broker deliveries are published to instead of url, its URL's password masked (****); null " +
      "for an HTTP endpoint. A confirmed publish is logged as an attempt with status_code 202",
    properties: {
      kind: { type: "string", enum: ["rabbitmq", "nats"] },
      url: { type: "string", description: "The broker URL, its password (or NATS token) replaced by ****" },
      exchange: { type: "string", description: "rabbitmq: the exchange published to" },
      routing_key: { type: ["string", "null"], description: "rabbitmq: the routing key; null: each event's type" },
      subject: { type: "string", description: "nats: the subject published to" },
    },
    required: ["kind", "url"],
  },
  event_types: {
    type: ["array", "null"],
    items: { type: "string", enum: [...LIFECYCLE_EVENT_TYPES] },
    description: "The event types sent to the endpoint; null: every type",
  },
  tag_ids: {
    type: ["array", "null"],
    items: uuid,
    description:
      "Only events whose reference carried one of these tags when the event was written; null: no tag filter; " +
      "[]: every tag of the filter was deleted, nothing is sent",
  },
  tag_filter_state: {
    type: "string",
    enum: [...TAG_FILTER_STATES],
    description: "none: no tag filter; active: a filter with tags; empty: its tags were all deleted",
  },
  description: { type: ["string", "null"] },
  enabled: { type: "boolean" },
  ordering: {
    type: "string",
    enum: [...WEBHOOK_ORDERINGS],
    description: "none: sent as soon as due; reference: one reference's deliveries one at a time, in log order",
  },
  disabled_reason: {
    type: ["string", "null"],
    description: "Why the service disabled the endpoint (410 Gone, failing too long); null otherwise",
  },
  failing_since: { ...nullableDateTime, description: "First failed attempt since the last success" },
  previous_secret_expires_at: {
    ...nullableDateTime,
    description: "Until then the secret before the last rotation signs beside the current one",
  },
  signing: {
    type: "string",
    enum: [...WEBHOOK_SIGNINGS],
    description: "hmac-sha256: v1 signatures with the whsec_ secret; ed25519: v1a signatures, verified with public_key",
  },
  public_key: {
    type: ["string", "null"],
    description:
      "ed25519: whpk_ + base64 of the raw 32-byte public key (DER prefix 302a300506032b6570032100 makes it an SPKI " +
      "key); a rotation replaces it, the key before keeps signing for 24 hours. null for hmac-sha256",
  },
  max_deliveries_per_second: {
    type: ["integer", "null"],
    description:
      "At most this many deliveries in any window of one second, wherever it starts, all instances together, " +
      "spread evenly; null: no throttle",
  },
  created_at: dateTime,
  updated_at: dateTime,
};

const webhookDeliveryProperties = {
  id: { ...uuid, description: "Delivery id: the webhook-id header of every attempt" },
  endpoint_id: { ...uuid, description: "The endpoint it is sent to" },
  event_id: { ...uuid, description: "The event's id (the body's `id`)" },
  event_type: { type: "string", description: "A lifecycle event type, or webhook_test" },
  status: { type: "string", enum: [...DELIVERY_STATUSES] },
  attempt_count: {
    type: "integer",
    description:
      "Attempts made for the delivery whose outcome was recorded or lost (an instance stopped before recording " +
      "it: such an attempt counts as a failure), re-sends included: the length of its attempts list once no " +
      "attempt is in flight. A re-send, a recovery or a replay starts the retry schedule again but does not " +
      "reset this count",
  },
  next_attempt_at: { ...nullableDateTime, description: "When the next attempt is due; null once settled" },
  held_back: {
    type: "boolean",
    description:
      "Pending, and held back behind an earlier delivery of its reference to this endpoint that is still pending " +
      "(ordering reference): it is not sent, whatever next_attempt_at says, until that one succeeds or fails; or " +
      "due while its endpoint's throttle has no turn free yet (held_back_reason)",
  },
  held_back_reason: {
    type: ["string", "null"],
    enum: [...HELD_BACK_REASONS, null],
    description:
      "Why it is held back: ordering (behind an earlier delivery of its reference) or throttled (its endpoint's " +
      "throttle has no turn free before a later time; it goes out then); null when it is not",
  },
  dropped_reason: {
    type: ["string", "null"],
    enum: [...DROPPED_REASONS, null],
    description:
      "Why the delivery was dropped unsent (then status is failed and no attempt was made for it), decided just " +
      "before it would have started with its endpoint as it was then: endpoint_disabled (the endpoint was " +
      "disabled) or filter_excluded (its event_types or tag filter no longer take the event). null when it was " +
      "not; a re-send, a recovery or a replay clears it",
  },
  body: {
    ...freeForm,
    description:
      "The exact JSON body sent on every attempt; for a lifecycle event, it validates against the schema " +
      "GET /v1/event-types gives for its type",
  },
  created_at: dateTime,
  updated_at: dateTime,
};

const webhookAttempt = record("One HTTP request of a delivery", {
  id: { ...uuid, description: "Attempt id" },
  attempted_at: dateTime,
  status_code: { type: ["integer", "null"], description: "The HTTP status received; null when none arrived" },
  error: { type: ["string", "null"], description: "Why it failed without a status (timeout, refused target…)" },
  latency_ms: { type: "integer" },
  response_body: {
    type: ["string", "null"],
    description:
      "The first 2 KB of the response body, as UTF-8: NUL bytes and invalid sequences are shown as U+FFFD, and " +
      "a character cut by the 2 KB limit is left out",
  },
});

/** The webhook components, in the order they appear in the document. */
export const WEBHOOK_RESPONSE_SCHEMAS = [
  { $id: "WebhookEndpoint", ...record("A webhook endpoint (never its secret)", webhookEndpointProperties) },
  {
    $id: "WebhookEndpointWithSecret",
    ...record("A webhook endpoint with its signing secret, shown this once", {
      ...webhookEndpointProperties,
      secret: {
        type: ["string", "null"],
        description:
          "`whsec_` + base64; store it now, it is never shown again. null for ed25519: verify with public_key",
      },
    }),
  },
  { $id: "WebhookEndpointPage", ...page("A page of webhook endpoints, newest first", "WebhookEndpoint") },
  { $id: "WebhookDelivery", ...record("One event for one endpoint", webhookDeliveryProperties) },
  { $id: "WebhookDeliveryPage", ...page("A page of deliveries, newest first", "WebhookDelivery") },
  { $id: "WebhookAttempt", ...webhookAttempt },
  {
    $id: "WebhookDeliveryWithAttempts",
    ...record("A delivery with every attempt, oldest first", {
      ...webhookDeliveryProperties,
      attempts: { type: "array", items: { $ref: "WebhookAttempt#" } },
    }),
  },
  {
    $id: "WebhookRecoveryCount",
    ...record("How many deliveries a recover or replay sends (or would send, with dry_run)", {
      count: { type: "integer", minimum: 0 },
    }),
  },
  {
    $id: "EventType",
    ...record("One event type of the catalog", {
      type: { type: "string", enum: [...LIFECYCLE_EVENT_TYPES] },
      description: { type: "string", description: "What happened, and which facts the payload holds" },
      schema: {
        ...freeForm,
        description:
          "The JSON Schema (draft 2020-12) of the webhook body delivered for this type; its `payload` is the " +
          "event's `detail`. The same schema is the OpenAPI document's `webhooks` entry for the type",
      },
    }),
  },
  {
    $id: "EventTypeList",
    ...record("Every lifecycle event type a webhook endpoint can receive", {
      data: { type: "array", items: { $ref: "EventType#" } },
    }),
  },
  {
    $id: "WebhookReplayState",
    ...record("An endpoint's replay still being scheduled", {
      replay: {
        type: ["object", "null"],
        description:
          "null: no replay is being scheduled. A replay follows the endpoint as it is at each batch: its filters " +
          "select what is sent from then on; disabling the endpoint pauses it, enabling resumes it, deleting ends it",
        properties: {
          state: {
            type: "string",
            enum: ["running", "paused"],
            description: "paused: the endpoint is disabled; nothing more is scheduled until it is enabled again",
          },
          remaining: {
            type: "integer",
            minimum: 1,
            description: "At most this many events are still to be scheduled (fewer when the filters were narrowed)",
          },
          since: dateTime,
          until: dateTime,
        },
        required: ["state", "remaining", "since", "until"],
        additionalProperties: false,
      },
    }),
  },
  {
    $id: "WebhookHeldBack",
    ...record("What an endpoint with ordering reference holds back", {
      ordering: { type: "string", enum: [...WEBHOOK_ORDERINGS] },
      held_back_references: {
        type: "integer",
        description: "References whose later deliveries wait behind an earlier one not yet succeeded or given up",
      },
      held_back_deliveries: { type: "integer", description: "Deliveries waiting so, all references" },
      oldest_held_back: {
        type: ["object", "null"],
        description: "The oldest event held back (log order); null when nothing is",
        properties: {
          delivery_id: uuid,
          reference_id: uuid,
          event_id: uuid,
          event_type: { type: "string", enum: [...LIFECYCLE_EVENT_TYPES] },
          occurred_at: dateTime,
        },
        required: ["delivery_id", "reference_id", "event_id", "event_type", "occurred_at"],
        additionalProperties: false,
      },
    }),
  },
] as const;
