import { LIFECYCLE_EVENT_TYPES } from "../../domain/lifecycle/lifecycle-event.ts";
import { WEBHOOK_ORDERINGS } from "../../domain/webhooks/webhook-models.ts";
import { WEBHOOK_SIGNINGS } from "../../domain/webhooks/signing-keys.ts";
import {
  MAX_DELIVERIES_PER_SECOND,
  MAX_DESCRIPTION_LENGTH,
  MAX_FILTER_TAGS,
} from "../../domain/webhooks/webhook-endpoint-input.ts";
import { DESTINATION_KINDS } from "../../domain/webhooks/webhook-destination.ts";

/* A webhook endpoint's request body under /v1/webhooks: its JSON Schema (OpenAPI) and its domain input. */

const eventTypesSchema = {
  type: ["array", "null"],
  items: { type: "string", enum: [...LIFECYCLE_EVENT_TYPES] },
  minItems: 1,
  description: "The event types sent to the endpoint; null or absent: every type",
} as const;

export const endpointProperties = {
  url: {
    type: "string",
    description:
      "https or http URL of at most 2,048 characters; private, loopback and link-local targets are refused unless " +
      "allowed. Exactly one of url and destination is given on creation; on update, either one replaces the other",
  },
  destination: {
    type: "object",
    description:
      "A message broker to publish events to instead of an HTTP URL: " +
      '{"kind": "rabbitmq", "url": "amqp://…", "exchange": "…", "routing_key": "…"} (routing_key defaults to the ' +
      'event type) or {"kind": "nats", "url": "nats://…", "subject": "…"}. The URL may hold credentials: it is ' +
      "stored encrypted and read back with its password masked; on update, a destination of the endpoint's kind " +
      "without url keeps the current one. Its host passes the same checks as an HTTP url's. The exchange or stream " +
      "must exist: reftrail never creates it",
    properties: {
      kind: { type: "string", enum: [...DESTINATION_KINDS] },
      url: {
        type: "string",
        description: "amqp:// or amqps:// (rabbitmq), nats:// or tls:// (nats; tls:// requires TLS)",
      },
      exchange: { type: "string", description: "rabbitmq: the receiver's exchange" },
      routing_key: { type: ["string", "null"], description: "rabbitmq: the routing key; absent: the event type" },
      subject: { type: "string", description: "nats: the subject a stream of the receiver's captures" },
    },
    required: ["kind"],
    additionalProperties: false,
  },
  event_types: eventTypesSchema,
  tag_ids: {
    type: ["array", "null"],
    items: { type: "string" },
    minItems: 1,
    maxItems: MAX_FILTER_TAGS,
    description:
      "Send only events whose reference carried at least one of these tags (ids of the organization's tags) " +
      "when the event was written (the event's tag snapshot); null or absent: every reference. Combined with " +
      "event_types by AND. An id that is not a tag of the organization: 422 with a pointer to it.",
  },
  description: {
    type: ["string", "null"],
    description: `A note for people, at most ${MAX_DESCRIPTION_LENGTH} characters`,
  },
  enabled: { type: "boolean", description: "Disabled endpoints receive nothing" },
  ordering: {
    type: "string",
    enum: [...WEBHOOK_ORDERINGS],
    description:
      "none (default): deliveries go out as soon as they are due, in parallel; reference: the deliveries of one " +
      "reference's events go out one at a time, in the log's order, each after the previous one succeeded or was " +
      "given up (a retry holds back only its own reference). Applies to deliveries queued from then on; turning " +
      "it off releases the deliveries it holds back",
  },
  signing: {
    type: "string",
    enum: [...WEBHOOK_SIGNINGS],
    description:
      "hmac-sha256 (default): a whsec_ secret returned once, v1 signatures; ed25519: v1a signatures verified with " +
      "the endpoint's public_key (whpk_), the private key never leaves the server. Fixed at creation: on PATCH the " +
      "same value is accepted, another one is a 422",
  },
  max_deliveries_per_second: {
    type: ["integer", "null"],
    description:
      `At most this many deliveries in any window of one second, wherever it starts (1 to ${MAX_DELIVERIES_PER_SECOND}), ` +
      "counted across every instance; null or absent: no throttle. Deliveries are spread evenly, one every " +
      "1.1 s / max_deliveries_per_second; those waiting for their turn are held back (held_back_reason " +
      "throttled), in order, and do not count as attempts",
  },
} as const;

interface DestinationBody {
  kind: string;
  url?: string;
  exchange?: string;
  routing_key?: string | null;
  subject?: string;
}

export interface EndpointBody {
  url?: string;
  destination?: DestinationBody | null;
  event_types?: string[] | null;
  tag_ids?: string[] | null;
  description?: string | null;
  enabled?: boolean;
  ordering?: string;
  signing?: string;
  max_deliveries_per_second?: number | null;
}

export const toInput = (body: EndpointBody) => ({
  url: body.url,
  destination: body.destination && destinationInput(body.destination),
  eventTypes: body.event_types,
  tagIds: body.tag_ids,
  description: body.description,
  enabled: body.enabled,
  ordering: body.ordering,
  signing: body.signing,
  maxDeliveriesPerSecond: body.max_deliveries_per_second,
});

/** The domain's field names (`routingKey`); absent fields stay absent. */
function destinationInput({ routing_key, ...rest }: DestinationBody): Record<string, unknown> {
  return routing_key === undefined ? rest : { ...rest, routingKey: routing_key };
}
