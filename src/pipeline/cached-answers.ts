import type { CostBudgetService } from "../domain/budgets/cost-budget-service.ts";
import type { BudgetCharge } from "../domain/budgets/cost-budget.ts";
import { UNAVAILABLE_RETRY_AFTER_SECONDS, type BytesAnswer } from "./answers.ts";
import { joinPublishedCost } from "./budget/cached-cost.ts";
import { THROTTLED, throttledMessage, type PublishedCost } from "./budget/published-cost.ts";
import { SERVICE_UNAVAILABLE, SERVICE_UNAVAILABLE_MESSAGE } from "./errors/error-masking.ts";
import type { OperationRequest } from "./operation-request.ts";
import type { CachedCost, CachedResponse } from "./read-cache/read-cache.ts";

/*
 * Stage 3's answer (src/pipeline/graphql-pipeline.ts, `lookUp`): a kept answer is charged like the answer it
 * repeats (its estimate, settled to its actual cost) and sent as its bytes with the cost of this request; a budget
 * that holds less is a 429 THROTTLED, a database out a 503, as for an answer computed afresh.
 */

export async function answerFromCache(
  request: OperationRequest,
  hit: CachedResponse & { readonly cost: CachedCost },
  deps: {
    readonly budgets: CostBudgetService;
    readonly isServiceUnavailable: (error: unknown) => boolean;
  },
): Promise<BytesAnswer> {
  const { budgets } = deps;
  const caller = request.caller!;
  const { requested, actual } = hit.cost;
  let charge: BudgetCharge;
  try {
    charge = await budgets.charge(caller, requested);
  } catch (error) {
    if (!deps.isServiceUnavailable(error)) throw error;
    request.log.error({ err: error }, "database unavailable");
    return {
      status: 503,
      headers: { "retry-after": String(UNAVAILABLE_RETRY_AFTER_SECONDS), "cache-control": "no-store" },
      contentType: "application/json; charset=utf-8",
      body: JSON.stringify({
        errors: [{ message: SERVICE_UNAVAILABLE_MESSAGE, extensions: { code: SERVICE_UNAVAILABLE } }],
      }),
    };
  }
  if (!charge.granted) {
    const cost: PublishedCost = { requestedQueryCost: requested, actualQueryCost: 0, throttleStatus: charge.status };
    return {
      status: 429,
      headers: { "retry-after": String(charge.retryAfterSeconds), "cache-control": "no-store" },
      contentType: hit.contentType,
      body: `${JSON.stringify({
        errors: [
          {
            message: throttledMessage(requested, charge),
            extensions: { code: THROTTLED, retryAfterSeconds: charge.retryAfterSeconds },
          },
        ],
        extensions: { cost },
      })}\n`,
    };
  }
  const cost: PublishedCost = {
    requestedQueryCost: requested,
    actualQueryCost: actual,
    throttleStatus: budgets.settle(caller, charge, actual),
  };
  return {
    status: 200,
    headers: { "cache-control": "no-store" },
    contentType: hit.contentType,
    body: joinPublishedCost(hit.body, cost),
  };
}
