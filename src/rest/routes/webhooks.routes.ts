import type { FastifyInstance } from "fastify";
import type { Services } from "../../domain/services.ts";
import {
  DELIVERY_STATUSES,
  tagFilterStateOf,
  type WebhookAttempt,
  type WebhookDeliveryView,
  type WebhookEndpoint,
} from "../../domain/webhooks/webhook-models.ts";
import { maskedDestination, type BrokerDestination } from "../../domain/webhooks/webhook-destination.ts";
import { endpointProperties, toInput, type EndpointBody } from "./webhook-endpoint-body.ts";
import { callerOf, changeOf } from "../rest-api.ts";
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
    dropped_reason: delivery.droppedReason,
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
        changeOf(request),
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
          changeOf(request),
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
      await services.webhooks.deleteEndpoint(
        callerOf(request).organizationId,
        request.params.webhookId,
        changeOf(request),
      );
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
        changeOf(request),
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
