import type { FastifyInstance } from "fastify";
import type { Services } from "../../domain/services.ts";
import { MAX_DELIVERIES_PER_CALL } from "../../domain/webhooks/webhook-recovery-service.ts";
import { callerOf, changeOf } from "../rest-api.ts";
import { BODY_PROBLEMS, problems, success } from "../response-schemas.ts";
import { uuidParam } from "../schemas.ts";

/*
 * Recovery, replay (and its state), and the held-back summary of a webhook endpoint under
 * /v1/webhooks/{webhookId}.
 */

const tags = ["webhooks"];
const webhookIdParam = uuidParam("webhookId", "Webhook endpoint id");

const windowBody = {
  type: "object",
  properties: {
    since: {
      type: "string",
      description: "Start of the window (inclusive), an ISO 8601 date-time; not older than the log's retention",
    },
    until: {
      type: "string",
      description: "End of the window (exclusive), an ISO 8601 date-time not before since; default: now",
    },
    dry_run: {
      type: "boolean",
      description:
        "true: send nothing, answer 200 with the count the call would send (even above the limit); default false",
    },
  },
  required: ["since"],
  additionalProperties: false,
} as const;

interface WindowBody {
  since: string;
  until?: string;
  dry_run?: boolean;
}

const responses = (what: string) => ({
  200: success(`dry_run: how many deliveries ${what} would send`, "WebhookRecoveryCount"),
  202: success(`How many deliveries ${what} sends`, "WebhookRecoveryCount"),
  ...problems(...BODY_PROBLEMS, 404, 409),
});

const limitNote =
  `At most ${MAX_DELIVERIES_PER_CALL.toLocaleString("en-US")} deliveries per call: beyond, 422 LIMIT_EXCEEDED ` +
  "whose `matched` says how many the window matched. 422 VALIDATION_FAILED when since is older than the log's " +
  "retention or after until; 409 when the endpoint is disabled.";

export function registerWebhookRecoveryRoutes(app: FastifyInstance, services: Services): void {
  app.post<{ Params: { webhookId: string }; Body: WindowBody }>(
    "/webhooks/:webhookId/recover",
    {
      schema: {
        tags,
        operationId: "recoverWebhookDeliveries",
        summary: "Send again the endpoint's failed or given-up deliveries created in [since, until)",
        description:
          "Every delivery of the endpoint created in the window whose last attempt failed or that was given up is " +
          "sent again now, in the order they were created, each with its original webhook-id and body and a fresh " +
          "retry schedule. On an endpoint ordered by reference, a recovered delivery goes out before the later " +
          "deliveries of its reference that have not succeeded yet, which wait behind it as behind the head of the " +
          "order (a request already in flight is not recalled); one whose later deliveries all succeeded goes out " +
          "at once. " +
          limitNote,
        params: webhookIdParam,
        body: windowBody,
        response: responses("recovery"),
      },
    },
    async (request, reply) => {
      const { since, until, dry_run: dryRun } = request.body;
      const count = await services.webhookRecovery.recover(
        callerOf(request).organizationId,
        request.params.webhookId,
        {
          since,
          until,
          dryRun,
        },
        changeOf(request),
      );
      return reply.code(dryRun ? 200 : 202).send({ count });
    },
  );

  app.post<{ Params: { webhookId: string }; Body: WindowBody }>(
    "/webhooks/:webhookId/replay",
    {
      schema: {
        tags,
        operationId: "replayWebhookEvents",
        summary: "Send the endpoint every event of [since, until) that its filters match today",
        description:
          "One delivery per event of the log written in the window that matches the endpoint's event types and tag " +
          "filter as they are now (tags by the event's tag snapshot), oldest first, whether or not it was delivered " +
          "before. An event that already has a delivery to the endpoint is sent again under that delivery's " +
          "webhook-id; otherwise a new delivery is made. Bodies are those of live deliveries (the tag snapshot of " +
          "the event's time). The count is taken when the call is made; the deliveries are then scheduled in " +
          "batches as the earlier ones go out, so a large window does not crowd out other endpoints. On an " +
          "endpoint with ordering reference, replayed deliveries keep their reference's order. The replay outlives " +
          "the instance that took the call: if it stops, another instance (or the same one restarted) goes on where " +
          "it stopped. One replay at a time per endpoint: 409 while an earlier one is still being scheduled. " +
          limitNote,
        params: webhookIdParam,
        body: windowBody,
        response: responses("the replay"),
      },
    },
    async (request, reply) => {
      const { since, until, dry_run: dryRun } = request.body;
      const count = await services.webhookRecovery.replay(
        callerOf(request).organizationId,
        request.params.webhookId,
        {
          since,
          until,
          dryRun,
        },
        changeOf(request),
      );
      return reply.code(dryRun ? 200 : 202).send({ count });
    },
  );

  app.get<{ Params: { webhookId: string } }>(
    "/webhooks/:webhookId/replay",
    {
      schema: {
        tags,
        operationId: "getWebhookReplay",
        summary:
          "The endpoint's replay still being scheduled, if any: running, or paused while the endpoint is disabled",
        params: webhookIdParam,
        response: { 200: success("The replay, or null", "WebhookReplayState"), ...problems(404) },
      },
    },
    async (request) => {
      const replay = await services.webhookRecovery.replayOf(
        callerOf(request).organizationId,
        request.params.webhookId,
      );
      return {
        replay: replay && {
          state: replay.state,
          remaining: replay.remaining,
          since: replay.since.toISOString(),
          until: replay.until.toISOString(),
        },
      };
    },
  );

  app.get<{ Params: { webhookId: string } }>(
    "/webhooks/:webhookId/held-back",
    {
      schema: {
        tags,
        operationId: "getWebhookHeldBack",
        summary: "What the endpoint's ordering holds back: references and deliveries waiting behind an earlier one",
        params: webhookIdParam,
        response: { 200: success("The summary", "WebhookHeldBack"), ...problems(404) },
      },
    },
    async (request) => {
      const { organizationId } = callerOf(request);
      const endpoint = await services.webhooks.getEndpoint(organizationId, request.params.webhookId);
      const summary = await services.webhookRecovery.heldBack(organizationId, endpoint.id);
      return {
        ordering: endpoint.ordering,
        held_back_references: summary.references,
        held_back_deliveries: summary.deliveries,
        oldest_held_back: summary.oldest && {
          delivery_id: summary.oldest.deliveryId,
          reference_id: summary.oldest.referenceId,
          event_id: summary.oldest.eventId,
          event_type: summary.oldest.eventType,
          occurred_at: summary.oldest.occurredAt.toISOString(),
        },
      };
    },
  );
}
