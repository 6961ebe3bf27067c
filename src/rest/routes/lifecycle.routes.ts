import type { FastifyInstance } from "fastify";
import type { Services } from "../../domain/services.ts";
import { parseDateTime } from "../../domain/shared/date-time.ts";
import { DomainError } from "../../domain/shared/errors.ts";
import { callerOf } from "../rest-api.ts";
import { problems, success } from "../response-schemas.ts";
import { pageQuery, uuidParam } from "../schemas.ts";
import { serializeEvent } from "../serializers.ts";

interface EventsQuery {
  limit: number;
  cursor?: string;
  type?: string[];
  from?: string;
  to?: string;
  order: "asc" | "desc";
}

function dateParameter(name: "from" | "to", value: string | undefined): Date | undefined {
  if (value === undefined) return undefined;
  const date = parseDateTime(value);
  if (!date) {
    throw new DomainError(
      "INVALID_DATE_TIME",
      `${name} must be an ISO 8601 date-time with an offset, e.g. 2026-11-22T02:49:01.665Z`,
      [{ path: [name], code: "INVALID_DATE_TIME", message: "not an ISO 8601 date-time with an offset" }],
    );
  }
  return date;
}

export function registerLifecycleRoutes(app: FastifyInstance, services: Services): void {
  app.get<{ Params: { referenceId: string }; Querystring: EventsQuery }>(
    "/references/:referenceId/events",
    {
      config: { readCache: true },
      schema: {
        tags: ["lifecycle"],
        operationId: "listReferenceEvents",
        summary: "The reference's lifecycle log in (occurred_at, id) order",
        params: uuidParam("referenceId", "Reference id"),
        querystring: {
          type: "object",
          properties: {
            ...pageQuery,
            type: {
              type: "array",
              items: { type: "string" },
              description: "Event types; repeat the parameter (type=a&type=b) or separate with commas (type=a,b)",
            },
            from: {
              type: "string",
              description: "Inclusive lower bound on occurred_at (date-time with offset, years 0001–9999 in UTC)",
            },
            to: {
              type: "string",
              description: "Inclusive upper bound on occurred_at (date-time with offset, years 0001–9999 in UTC)",
            },
            order: {
              type: "string",
              enum: ["asc", "desc"],
              default: "asc",
              description: "asc: oldest first (default); desc: newest first, by (occurred_at, id)",
            },
          },
        },
        response: { 200: success("A page of the log", "LifecycleEventPage"), ...problems(400, 404) },
      },
    },
    async (request) => {
      const query = request.query;
      const page = await services.lifecycleLog.listEvents(
        callerOf(request).organizationId,
        request.params.referenceId,
        {
          // Not splitRepeatedValues: empty items are kept, so that the service refuses `type=` and `type=a,,b` as
          // unknown types instead of reading them as "every type".
          types: query.type?.flatMap((value) => value.split(",")).map((type) => type.trim()),
          from: dateParameter("from", query.from),
          to: dateParameter("to", query.to),
          order: query.order,
          limit: query.limit,
          cursor: query.cursor,
        },
      );
      return { data: page.items.map(serializeEvent), next_cursor: page.nextCursor };
    },
  );
}
