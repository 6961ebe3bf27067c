import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { BudgetCharge } from "../domain/budgets/cost-budget.ts";
import type { BudgetHolder, CostBudgetService } from "../domain/budgets/cost-budget-service.ts";
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from "../domain/shared/page.ts";
import { problem, sendProblem } from "./problem.ts";
import {
  rateLimitField,
  rateLimitPolicyField,
  THROTTLED,
  throttledMessage,
} from "../pipeline/budget/published-cost.ts";
import { isJsonObject } from "../domain/shared/json-input.ts";

/*
 * The cost budget of the REST API (docs/decisions.md, "Cost budgets"): each authenticated /v1 request draws from
 * its key's bucket, the same bucket as GraphQL, in preValidation (after authentication and body parsing, before
 * the read cache: a response the cache holds costs what computing it costs). A request's cost is set by what it
 * asks, or, where the route says so, by what it read:
 * - a page of a list (a route with a `limit` parameter) costs its page size, `limit` or its default (50): the rows
 *   it may read, as a GraphQL connection's `first` multiplies its estimate;
 * - a bulk ingestion costs its number of items, a trusted-document registration its number of documents;
 * - a route whose reads depend on the data more than on what it asks (the feed to poll: a filter that matches
 *   little reads up to 5,000 rows for a page of one) declares the most it may read (`config.costUpTo`): it is
 *   charged that before it runs, and settles to what it read (`settleRestCost`), never less than its page size;
 * - every other request costs 1.
 * Every answer carries `RateLimit-Policy` and `RateLimit` (draft-ietf-httpapi-ratelimit-headers-11); a request the
 * bucket cannot pay for is 429 THROTTLED with `Retry-After`.
 */

declare module "fastify" {
  interface FastifyContextConfig {
    /** The most this route's request may cost, charged up front and settled by the route (see the top). */
    costUpTo?: number;
  }
}

/** The charge each request paid, for the route to settle. */
const charges = new WeakMap<
  FastifyRequest,
  { readonly budgets: CostBudgetService; readonly caller: BudgetHolder; readonly charge: BudgetCharge }
>();

/** What `request` costs before it runs (above). */
export function restRequestCost(request: FastifyRequest): number {
  const upTo = request.routeOptions.config.costUpTo;
  if (upTo !== undefined) return upTo;
  const querystring = request.routeOptions.schema?.querystring as
    { readonly properties?: Readonly<Record<string, unknown>> } | undefined;
  // An invalid limit is refused by validation right after; it is charged the default meanwhile.
  if (querystring?.properties?.limit !== undefined) return pageSizeOf(request);
  const items = (request.body as { readonly items?: unknown } | null | undefined)?.items;
  if (request.method === "POST" && request.routeOptions.url === "/v1/ingestions" && Array.isArray(items)) {
    return Math.max(1, items.length);
  }
  const body = request.body;
  if (request.method === "POST" && request.routeOptions.url === "/v1/trusted-documents" && isJsonObject(body)) {
    return Math.max(1, Object.keys(body).length);
  }
  return 1;
}

/** The page size a request asked for (`limit`), or the default: the least a page costs. */
function pageSizeOf(request: FastifyRequest): number {
  const asked = Number((request.query as Record<string, unknown> | null)?.limit);
  return Number.isInteger(asked) && asked >= 1 && asked <= MAX_PAGE_SIZE ? asked : DEFAULT_PAGE_SIZE;
}

/**
 * Gives back what a route that declared `costUpTo` did not use: it costs `actualCost`. The response's `RateLimit`
 * field says what the bucket holds after the refund.
 */
export function settleRestCost(request: FastifyRequest, reply: FastifyReply, actualCost: number): void {
  const paid = charges.get(request);
  if (!paid) return;
  charges.delete(request);
  const status = paid.budgets.settle(paid.caller, paid.charge, actualCost);
  void reply.header("ratelimit", rateLimitField(status));
}

/** Charges every authenticated /v1 request (register after authentication, before the read cache). */
export function registerRestCostBudget(app: FastifyInstance, budgets: CostBudgetService): void {
  app.addHook("preValidation", async (request, reply) => {
    const caller = request.caller;
    if (!caller) return;
    const cost = restRequestCost(request);
    const charge = await budgets.charge(caller, cost);
    if (charge.granted && request.routeOptions.config.costUpTo !== undefined) {
      charges.set(request, { budgets, caller, charge });
    }
    void reply.header("ratelimit-policy", rateLimitPolicyField(charge.status));
    void reply.header("ratelimit", rateLimitField(charge.status));
    if (charge.granted) return;
    void reply.header("retry-after", String(charge.retryAfterSeconds));
    return sendProblem(reply, problem(429, THROTTLED, throttledMessage(cost, charge)));
  });
}
