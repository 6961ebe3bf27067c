import type { FastifyInstance, FastifyRequest } from "fastify";
import type { CostBudgetService } from "../domain/budgets/cost-budget-service.ts";
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from "../domain/shared/page.ts";
import { problem, sendProblem } from "./problem.ts";
import {
  rateLimitField,
  rateLimitPolicyField,
  THROTTLED,
  throttledMessage,
} from "../pipeline/budget/published-cost.ts";

/*
 * The cost budget of the REST API (docs/decisions.md, "Cost budgets"): each authenticated /v1 request draws from
 * its key's bucket, the same bucket as GraphQL, in preValidation (after authentication and body parsing, before
 * the read cache: a response the cache holds costs what computing it costs). A request's cost is fixed by what it
 * asks, never refunded:
 * - a page of a list (a route with a `limit` parameter) costs its page size, `limit` or its default (50): the rows
 *   it may read, as a GraphQL connection's `first` multiplies its estimate;
 * - a bulk ingestion costs its number of items;
 * - every other request costs 1.
 * Every answer carries `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers-11); a request the
 * bucket cannot pay for is 429 THROTTLED with `Retry-After`.
 */

/** What `request` costs (above). */
export function restRequestCost(request: FastifyRequest): number {
  const querystring = request.routeOptions.schema?.querystring as
    { readonly properties?: Readonly<Record<string, unknown>> } | undefined;
  if (querystring?.properties?.limit !== undefined) {
    const asked = Number((request.query as Record<string, unknown> | null)?.limit);
    // An invalid limit is refused by validation right after; it is charged the default meanwhile.
    return Number.isInteger(asked) && asked >= 1 && asked <= MAX_PAGE_SIZE ? asked : DEFAULT_PAGE_SIZE;
  }
  const items = (request.body as { readonly items?: unknown } | null | undefined)?.items;
  if (request.method === "POST" && request.routeOptions.url === "/v1/ingestions" && Array.isArray(items)) {
    return Math.max(1, items.length);
  }
  return 1;
}

/** Charges every authenticated /v1 request (register after authentication, before the read cache). */
export function registerRestCostBudget(app: FastifyInstance, budgets: CostBudgetService): void {
  app.addHook("preValidation", async (request, reply) => {
    const caller = request.caller;
    if (!caller) return;
    const cost = restRequestCost(request);
    const charge = await budgets.charge(caller, cost);
    void reply.header("ratelimit-policy", rateLimitPolicyField(charge.status));
    void reply.header("ratelimit", rateLimitField(charge.status));
    if (charge.granted) return;
    void reply.header("retry-after", String(charge.retryAfterSeconds));
    return sendProblem(reply, problem(429, THROTTLED, throttledMessage(cost, charge)));
  });
}
