import type { FastifyInstance } from "fastify";
import { LIFECYCLE_EVENT_TYPES } from "../../domain/lifecycle/lifecycle-event.ts";
import type { Services } from "../../domain/services.ts";
import {
  DELIVERY_STATUSES,
  tagFilterStateOf,
  WEBHOOK_ORDERINGS,
  type WebhookAttempt,
  type WebhookDeliveryView,
  type WebhookEndpoint,
} from "../../domain/webhooks/webhook-models.ts";
import { WEBHOOK_SIGNINGS } from "../../domain/webhooks/signing-keys.ts";
import {
  MAX_DELIVERIES_PER_SECOND,
  MAX_DESCRIPTION_LENGTH,
  MAX_FILTER_TAGS,
} from "../../domain/webhooks/webhook-endpoint-input.ts";
import {
  DESTINATION_KINDS,
  maskedDestination,
  type BrokerDestination,
} from "../../domain/webhooks/webhook-destination.ts";
import { callerOf } from "../rest-api.ts";
import { BODY_PROBLEMS, noContent, problems, success } from "../response-schemas.ts";
import { idempotencyKeyHeader, pageQuery, uuidParam } from "../schemas.ts";

/* Webhook endpoints and their deliveries under /v1/webhooks (SPEC §9, §14). */

const tags = ["webhooks"];
const webhookIdParam = uuidParam("webhookId", "Webhook endpoint id");
const deliveryParams = {
  type: "object",
  properties: {
    webhookId: { type: "string", description: "Webhook endpoint id" },
    deliveryId: { type: "string", description: "Delivery id (the webhook-id header of its requests)" },
  },
  required: ["webhookId", "deliveryId"],
} as const;

const eventTypesSchema = {
  type: ["array", "null"],
  items: { type: "string", enum: [...LIFECYCLE_EVENT_TYPES] },
  minItems: 1,
  description: "The event types sent to the endpoint; null or absent: every type",
} as const;

const endpointProperties = {
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
      url: { type: "string", description: "amqp:// or amqps:// (rabbitmq), nats:// (nats)" },
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
      `At most this many deliveries in any one second (1 to ${MAX_DELIVERIES_PER_SECOND}), counted across every ` +
      "instance; null or absent: no throttle. Deliveries beyond it wait for a later second (held_back_reason " +
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

interface EndpointBody {
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

const iso = (date: Date | null) => (date ? date.toISOString() : null);

export function serializeWebhookEndpoint(endpoint: WebhookEndpoint) {
  return {
    id: endpoint.id,
    url: endpoint.url,
    destination: endpoint.destination && serializeDestination(maskedDestination(endpoint.destination)),
    event_types: endpoint.eventTypes,
    // null: no tag filter; []: every tag of the filter was deleted and nothing is sent (tag_filter_state "empty").
    tag_ids: endpoint.tagIds,
    tag_filter_state: tagFilterStateOf(endpoint),
    description: endpoint.description,
    enabled: endpoint.enabled,
    ordering: endpoint.ordering,
    disabled_reason: endpoint.disabledReason,
    failing_since: iso(endpoint.failingSince),
    previous_secret_expires_at: iso(endpoint.previousSecretExpiresAt),
    signing: endpoint.signing,
    public_key: endpoint.publicKey,
    max_deliveries_per_second: endpoint.maxDeliveriesPerSecond,
    created_at: endpoint.createdAt.toISOString(),
    updated_at: endpoint.updatedAt.toISOString(),
  };
}

function serializeDestination(destination: BrokerDestination) {
  if (destination.kind === "nats") return destination;
  const { kind, url, exchange, routingKey } = destination;
  return { kind, url, exchange, routing_key: routingKey };
}

export function serializeWebhookDelivery(delivery: WebhookDeliveryView) {
  return {
    id: delivery.id,
    // The endpoint (the {webhookId} of the paths); the delivery's own id is the webhook-id header.
    endpoint_id: delivery.endpointId,
    event_id: delivery.eventId,
    event_type: delivery.eventType,
    status: delivery.status,
    attempt_count: delivery.attemptCount,
    next_attempt_at: iso(delivery.nextAttemptAt),
    held_back: delivery.heldBack,
    held_back_reason: delivery.heldBackReason,
    body: JSON.parse(delivery.body) as unknown,
    created_at: delivery.createdAt.toISOString(),
    updated_at: delivery.updatedAt.toISOString(),
  };
}

export function serializeWebhookAttempt(attempt: WebhookAttempt) {
  return {
    id: attempt.id,
    attempted_at: attempt.attemptedAt.toISOString(),
    status_code: attempt.statusCode,
    error: attempt.error,
    latency_ms: attempt.latencyMs,
    response_body: attempt.responseBody,
  };
}

const toInput = (body: EndpointBody) => ({
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

export function registerWebhookRoutes(app: FastifyInstance, services: Services): void {
  app.post<{ Body: EndpointBody }>(
    "/webhooks",
    {
      schema: {
        tags,
        operationId: "createWebhookEndpoint",
        summary: "Create a webhook endpoint; the response holds its signing secret, shown this once",
        headers: idempotencyKeyHeader,
        body: { type: "object", properties: endpointProperties, additionalProperties: false },
        response: {
          201: success("The endpoint with its secret", "WebhookEndpointWithSecret", {
            location: true,
            replayable: true,
          }),
          ...problems(...BODY_PROBLEMS),
        },
      },
      config: { locationOf: (endpoint: { id: string }) => `/v1/webhooks/${endpoint.id}` },
    },
    async (request, reply) => {
      const { endpoint, secret } = await services.webhooks.createEndpoint(
        callerOf(request).organizationId,
        toInput(request.body),
      );
      return reply.code(201).send({ ...serializeWebhookEndpoint(endpoint), secret });
    },
  );

  app.get<{ Querystring: { limit: number; cursor?: string } }>(
    "/webhooks",
    {
      schema: {
        tags,
        operationId: "listWebhookEndpoints",
        summary: "List webhook endpoints, newest first",
        querystring: { type: "object", properties: pageQuery },
        response: { 200: success("A page of endpoints", "WebhookEndpointPage"), ...problems(400) },
      },
    },
    async (request) => {
      const page = await services.webhooks.listEndpoints(callerOf(request).organizationId, request.query);
      return { data: page.items.map(serializeWebhookEndpoint), next_cursor: page.nextCursor };
    },
  );

  app.get<{ Params: { webhookId: string } }>(
    "/webhooks/:webhookId",
    {
      schema: {
        tags,
        operationId: "getWebhookEndpoint",
        summary: "Read a webhook endpoint (never its secret)",
        params: webhookIdParam,
        response: { 200: success("The endpoint", "WebhookEndpoint"), ...problems(404) },
      },
    },
    async (request) =>
      serializeWebhookEndpoint(
        await services.webhooks.getEndpoint(callerOf(request).organizationId, request.params.webhookId),
      ),
  );

  app.patch<{ Params: { webhookId: string }; Body: EndpointBody }>(
    "/webhooks/:webhookId",
    {
      schema: {
        tags,
        operationId: "updateWebhookEndpoint",
        summary:
          "Change a webhook endpoint's url or destination, event types, tag filter, description, enabled flag or ordering",
        description:
          "Once this has answered, no request begins toward the endpoint's old state, on any instance: none after a " +
          "disable, none to the old url. Deliveries already claimed are given up (disable) or sent as the endpoint " +
          "now is; requests that began before the answer may still arrive after it.",
        params: webhookIdParam,
        body: { type: "object", properties: endpointProperties, additionalProperties: false },
        response: { 200: success("The changed endpoint", "WebhookEndpoint"), ...problems(...BODY_PROBLEMS, 404) },
      },
    },
    async (request) =>
      serializeWebhookEndpoint(
        await services.webhooks.updateEndpoint(
          callerOf(request).organizationId,
          request.params.webhookId,
          toInput(request.body),
        ),
      ),
  );

  app.delete<{ Params: { webhookId: string } }>(
    "/webhooks/:webhookId",
    {
      schema: {
        tags,
        operationId: "deleteWebhookEndpoint",
        summary: "Delete a webhook endpoint with its deliveries",
        description:
          "Once this has answered, no request to the endpoint begins, on any instance; requests that began before " +
          "the answer may still arrive after it.",
        params: webhookIdParam,
        response: { 204: noContent("Deleted"), ...problems(404) },
      },
    },
    async (request, reply) => {
      await services.webhooks.deleteEndpoint(callerOf(request).organizationId, request.params.webhookId);
      return reply.code(204).send();
    },
  );

  app.post<{ Params: { webhookId: string } }>(
    "/webhooks/:webhookId/rotate-secret",
    {
      schema: {
        tags,
        operationId: "rotateWebhookEndpointSecret",
        summary:
          "Issue a new signing secret (shown this once); every secret rotated out keeps signing beside it for 24 hours",
        params: webhookIdParam,
        headers: idempotencyKeyHeader,
        response: {
          200: success("The endpoint with its new secret", "WebhookEndpointWithSecret", { replayable: true }),
          ...problems(404, 409, 422),
        },
      },
    },
    async (request) => {
      const { endpoint, secret } = await services.webhooks.rotateSecret(
        callerOf(request).organizationId,
        request.params.webhookId,
      );
      return { ...serializeWebhookEndpoint(endpoint), secret };
    },
  );

  app.post<{ Params: { webhookId: string } }>(
    "/webhooks/:webhookId/test",
    {
      schema: {
        tags,
        operationId: "sendTestWebhook",
        summary: "Queue a webhook_test event for the endpoint",
        params: webhookIdParam,
        headers: idempotencyKeyHeader,
        response: {
          202: success("The queued test delivery", "WebhookDelivery", { replayable: true }),
          ...problems(404, 409, 422),
        },
      },
    },
    async (request, reply) => {
      const delivery = await services.webhooks.sendTestEvent(
        callerOf(request).organizationId,
        request.params.webhookId,
      );
      return reply.code(202).send(serializeWebhookDelivery(delivery));
    },
  );

  app.get<{ Params: { webhookId: string }; Querystring: { limit: number; cursor?: string; status?: string } }>(
    "/webhooks/:webhookId/deliveries",
    {
      schema: {
        tags,
        operationId: "listWebhookDeliveries",
        summary: "The endpoint's deliveries, newest first",
        params: webhookIdParam,
        querystring: {
          type: "object",
          properties: {
            ...pageQuery,
            status: { type: "string", enum: [...DELIVERY_STATUSES], description: "Only deliveries in this status" },
          },
        },
        response: { 200: success("A page of deliveries", "WebhookDeliveryPage"), ...problems(400, 404) },
      },
    },
    async (request) => {
      const page = await services.webhooks.listDeliveries(
        callerOf(request).organizationId,
        request.params.webhookId,
        request.query,
      );
      return { data: page.items.map(serializeWebhookDelivery), next_cursor: page.nextCursor };
    },
  );

  app.get<{ Params: { webhookId: string; deliveryId: string } }>(
    "/webhooks/:webhookId/deliveries/:deliveryId",
    {
      schema: {
        tags,
        operationId: "getWebhookDelivery",
        summary: "One delivery with every attempt, oldest first",
        params: deliveryParams,
        response: { 200: success("The delivery", "WebhookDeliveryWithAttempts"), ...problems(404) },
      },
    },
    async (request) => {
      const { webhookId, deliveryId } = request.params;
      const delivery = await services.webhooks.getDelivery(callerOf(request).organizationId, webhookId, deliveryId);
      return { ...serializeWebhookDelivery(delivery), attempts: delivery.attempts.map(serializeWebhookAttempt) };
    },
  );

  app.post<{ Params: { webhookId: string; deliveryId: string } }>(
    "/webhooks/:webhookId/deliveries/:deliveryId/resend",
    {
      schema: {
        tags,
        operationId: "resendWebhookDelivery",
        summary: "Send a delivery again now, with the same webhook-id and body",
        description:
          "The delivery gets a fresh retry schedule; its attempt_count goes on counting. On an endpoint ordered by " +
          "reference it goes out before the later deliveries of its reference that have not succeeded yet, which " +
          "wait behind it as behind the head of the order (a request already in flight is not recalled), and " +
          "after an earlier one still pending; with none of those it goes out at once. 409 when the endpoint is " +
          "disabled.",
        params: deliveryParams,
        headers: idempotencyKeyHeader,
        response: {
          202: success("The requeued delivery", "WebhookDelivery", { replayable: true }),
          ...problems(404, 409, 422),
        },
      },
    },
    async (request, reply) => {
      const { webhookId, deliveryId } = request.params;
      const delivery = await services.webhooks.resendDelivery(callerOf(request).organizationId, webhookId, deliveryId);
      return reply.code(202).send(serializeWebhookDelivery(delivery));
    },
  );
}
