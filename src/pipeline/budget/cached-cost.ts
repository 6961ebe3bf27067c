import type { FastifyReply } from "fastify";
import type { BudgetHolder, CostBudgetService } from "../../domain/budgets/cost-budget-service.ts";
import type { CachedCost, CachedResponse } from "../read-cache/read-cache.ts";
import { THROTTLED, throttledMessage, type PublishedCost } from "./published-cost.ts";

/*
 * GraphQL responses the read cache answers (src/read-cache/graphql-http.ts) are charged like the response they
 * repeat: the same requested cost before, the same actual cost after, so that what a request costs never depends
 * on which instance answers it or what its cache holds. A kept response is its bytes up to its `extensions.cost`
 * (the last member the budget plugin writes, graphql-plugin.ts) and the two costs; a hit is those bytes, the
 * cost with the caller's bucket as it is now, and the closing braces.
 */

const COST_MEMBER = '"cost":';

/** A response's bytes up to its published cost, and that cost; null for one that publishes none. */
export function splitPublishedCost(payload: string): { head: string; cost: CachedCost } | null {
  const at = payload.lastIndexOf(`${COST_MEMBER}{"requestedQueryCost":`);
  const tail = payload.trimEnd();
  if (at < 0 || !tail.endsWith("}}")) return null;
  try {
    const cost = JSON.parse(tail.slice(at + COST_MEMBER.length, -2)) as PublishedCost;
    return { head: payload.slice(0, at), cost: { requested: cost.requestedQueryCost, actual: cost.actualQueryCost } };
  } catch {
    return null;
  }
}

/**
 * Sends a kept response to `caller`: charged its requested cost and refunded to its actual one, or refused with
 * THROTTLED (HTTP 429, `Retry-After`) when the bucket holds less.
 */
export async function sendCachedResponse(
  reply: FastifyReply,
  hit: CachedResponse & { readonly cost: CachedCost },
  caller: BudgetHolder,
  budgets: CostBudgetService,
): Promise<FastifyReply> {
  const { requested, actual } = hit.cost;
  const charge = await budgets.charge(caller, requested);
  // Apollo sends no-store on every GraphQL response (graphql-server.ts); so does a hit, and a refusal.
  void reply.header("cache-control", "no-store");
  if (!charge.granted) {
    const cost: PublishedCost = { requestedQueryCost: requested, actualQueryCost: 0, throttleStatus: charge.status };
    return reply
      .code(429)
      .header("retry-after", String(charge.retryAfterSeconds))
      .type(hit.contentType)
      .send(
        `${JSON.stringify({
          errors: [
            {
              message: throttledMessage(requested, charge),
              extensions: { code: THROTTLED, retryAfterSeconds: charge.retryAfterSeconds },
            },
          ],
          extensions: { cost },
        })}\n`,
      );
  }
  const cost: PublishedCost = {
    requestedQueryCost: requested,
    actualQueryCost: actual,
    throttleStatus: budgets.settle(caller, charge, actual),
  };
  const body = Buffer.concat([hit.body, Buffer.from(`${COST_MEMBER}${JSON.stringify(cost)}}}\n`)]);
  return reply.type(hit.contentType).send(body);
}
