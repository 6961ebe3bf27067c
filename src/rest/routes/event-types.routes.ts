import type { FastifyInstance } from "fastify";
import { EVENT_CATALOG } from "../../domain/webhooks/event-catalog.ts";
import { problems, success } from "../response-schemas.ts";

/* The event catalog (SPEC §9.3): every event type with the JSON Schema of the webhook body delivered for it. */

export function registerEventTypeRoutes(app: FastifyInstance): void {
  app.get(
    "/event-types",
    {
      schema: {
        tags: ["webhooks"],
        operationId: "listEventTypes",
        summary: "The event catalog: each event type, what it means, and the JSON Schema of its webhook body",
        response: { 200: success("Every event type", "EventTypeList"), ...problems() },
      },
    },
    // The same for every organization; authenticated like every /v1 route all the same.
    async () => ({ data: EVENT_CATALOG }),
  );
}
