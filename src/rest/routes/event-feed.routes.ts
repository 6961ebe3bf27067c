import type { FastifyInstance } from "fastify";
import { releaseReadAdmission } from "../../pipeline/admission/read-admission-gate.ts";
import { MAX_FEED_ROWS_SCANNED, MAX_FEED_WAIT_SECONDS } from "../../domain/live/event-feed-service.ts";
import type { Services } from "../../domain/services.ts";
import { settleRestCost } from "../cost-budget.hooks.ts";
import { callerOf } from "../rest-api.ts";
import { problems, success } from "../response-schemas.ts";
import { splitRepeatedValues } from "../schemas.ts";
import { serializeEvent } from "../serializers.ts";

/* The feed to poll (SPEC §10): the organization's whole lifecycle log in live order, with an optional long poll. */

interface EventFeedQuery {
  after?: string;
  limit: number;
  wait: number;
  reference_id?: string;
  tag_ids?: string[];
  tag_names?: string[];
  exclude_tag_ids?: string[];
  exclude_tag_names?: string[];
  type?: string[];
}

const SCAN_BOUND = MAX_FEED_ROWS_SCANNED.toLocaleString("en-US");

const repeatable = (description: string) => ({ type: "array", items: { type: "string" }, description }) as const;

export function registerEventFeedRoutes(app: FastifyInstance, services: Services): void {
  app.get<{ Querystring: EventFeedQuery }>(
    "/events",
    {
      config: { costUpTo: MAX_FEED_ROWS_SCANNED },
      schema: {
        tags: ["lifecycle"],
        operationId: "pollEvents",
        summary:
          "The organization's lifecycle log in live order (the subscriptions' order), to poll; optionally waits " +
          "for the next event",
        description:
          `A poll reads up to ${SCAN_BOUND} rows of the log (a filter that matches little answers with what it ` +
          "found, `has_more` and a cursor past what it read). Its cost is the rows it read, never less than " +
          `\`limit\`: it is charged ${SCAN_BOUND} before it runs and given back the rest (\`RateLimit\` on the ` +
          "answer). Tag names that no tag bears match nothing: such a poll answers at once, with a cursor at the " +
          "end of the log.",
        querystring: {
          type: "object",
          properties: {
            after: {
              type: "string",
              description:
                "Where to start: the `next_cursor` of the previous poll, or the `cursor` of a GraphQL subscription " +
                "message or edge of `lifecycleEvents`. None: the oldest event still in retention",
            },
            limit: { type: "integer", minimum: 1, maximum: 500, default: 100, description: "Page size, 1 to 500" },
            wait: {
              type: "integer",
              minimum: 0,
              maximum: MAX_FEED_WAIT_SECONDS,
              default: 0,
              description:
                "Seconds to wait when nothing newer matches: the answer comes as soon as a matching event commits " +
                "(through any instance), or when the time is up (an empty page)",
            },
            reference_id: { type: "string", description: "Only this reference's events (404 when there is none)" },
            tag_ids: repeatable(
              "Only events whose reference carried at least one of these tags when the event was written. " +
                "Repeatable; comma-separated lists are accepted too",
            ),
            tag_names: repeatable(
              "Like tag_ids, by name (case-insensitive; with tag_ids: at least one of all the tags listed). " +
                "Repeatable, not split on commas. Unknown names match nothing",
            ),
            exclude_tag_ids: repeatable(
              "Leave out events whose reference carried any of these tags when the event was written. Repeatable; " +
                "comma-separated lists are accepted too",
            ),
            exclude_tag_names: repeatable("Like exclude_tag_ids, by name (case-insensitive). Repeatable"),
            type: repeatable("Event types; repeat the parameter (type=a&type=b) or separate with commas (type=a,b)"),
          },
        },
        response: { 200: success("A page of the log", "EventFeedPage"), ...problems(400, 404) },
      },
    },
    async (request, reply) => {
      const query = request.query;
      // A client that goes away stops its poll's wait.
      const left = new AbortController();
      const abandon = () => {
        if (!reply.raw.writableFinished) left.abort();
      };
      reply.raw.once("close", abandon);
      try {
        const page = await services.eventFeed.readPage(
          callerOf(request).organizationId,
          {
            after: query.after ?? null,
            limit: query.limit,
            waitSeconds: query.wait,
            referenceId: query.reference_id ?? null,
            tagIds: splitRepeatedValues(query.tag_ids) ?? null,
            tagNames: query.tag_names ?? null,
            excludeTagIds: splitRepeatedValues(query.exclude_tag_ids) ?? null,
            excludeTagNames: query.exclude_tag_names ?? null,
            // Not splitRepeatedValues: `type=` and `type=a,,b` are unknown types, not "every type".
            types: query.type?.flatMap((value) => value.split(",")).map((type) => type.trim()) ?? null,
          },
          // A waiting poll gives its place among the reads in flight back (src/pipeline/admission/): it holds no resource.
          { signal: left.signal, onWait: () => releaseReadAdmission(reply.raw) },
        );
        // Priced by the rows it read, never below its page size (src/rest/cost-budget.hooks.ts).
        settleRestCost(request, reply, Math.max(query.limit, page.rowsRead));
        return { data: page.events.map(serializeEvent), next_cursor: page.nextCursor, has_more: page.hasMore };
      } finally {
        reply.raw.off("close", abandon);
      }
    },
  );
}
