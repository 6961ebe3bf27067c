import { HeaderMap, type ApolloServerPlugin, type BaseContext, type GraphQLResponse } from "@apollo/server";
import type { CostBudgetService, BudgetHolder } from "../domain/budgets/cost-budget-service.ts";
import type { BudgetCharge } from "../domain/budgets/cost-budget.ts";
import { actualOperationCost } from "../pipeline/budget/actual-cost.ts";
import { SERVICE_UNAVAILABLE, SERVICE_UNAVAILABLE_MESSAGE } from "../pipeline/errors/error-masking.ts";
import { THROTTLED, throttledMessage, type PublishedCost } from "../pipeline/budget/published-cost.ts";

/** Seconds a client is asked to wait when the budget could not be charged because the database is unavailable. */
const UNAVAILABLE_RETRY_AFTER_SECONDS = 5;

/** An answer in GraphQL's shape, sent instead of executing the operation. */
function refusal(
  status: number,
  retryAfterSeconds: number,
  message: string,
  code: string,
  extra = {},
): GraphQLResponse {
  return {
    http: { status, headers: new HeaderMap([["retry-after", String(retryAfterSeconds)]]) },
    body: { kind: "single", singleResult: { errors: [{ message, extensions: { code, ...extra } }] } },
  };
}

/**
 * The cost of a request refused before its cost was estimated: nothing requested, nothing ran, nothing charged,
 * and the caller's bucket as it is. Null when the bucket cannot be read (the database is unavailable): the refusal
 * then goes without it.
 */
export async function costOfRefusal(budgets: CostBudgetService, caller: BudgetHolder): Promise<PublishedCost | null> {
  let charge: BudgetCharge;
  try {
    charge = await budgets.charge(caller, 0);
  } catch {
    return null;
  }
  return {
    requestedQueryCost: 0,
    actualQueryCost: 0,
    throttleStatus: charge.granted ? budgets.settle(caller, charge, 0) : charge.status,
  };
}

/** A GraphQL request's cost as it goes: the estimate (set by src/graphql/limits.ts), then the charge. */
export interface OperationCostSlot {
  requested: number | null;
  charge: BudgetCharge | null;
}

/** What a GraphQL request's context offers the budget: the caller's key and the request's cost slot (HTTP only). */
export interface BudgetContext extends BaseContext {
  readonly caller?: BudgetHolder;
  readonly operationCost?: OperationCostSlot;
}

/**
 * The cost budget of GraphQL over HTTP (docs/decisions.md, "Cost budgets"). Once every check of the operation has
 * passed, its requested cost (the estimate) is charged to the caller's key: refused, the response is HTTP 429
 * `THROTTLED` with `Retry-After`, and nothing runs; granted, the operation runs (after the read admission) and the
 * part of the charge its actual cost did not use is given back. Every response of an authenticated request carries
 * `extensions.cost`; one refused before its cost was estimated (a document that does not parse or validate, one
 * over a limit) requested 0 and reports the bucket as it is.
 */
export function costBudgetPlugin<Context extends BudgetContext>(
  budgets: CostBudgetService,
  /** Recognizes an error that means the database is unreachable right now (answered 503, as elsewhere). */
  isServiceUnavailable: (error: unknown) => boolean,
): ApolloServerPlugin<Context> {
  return {
    async requestDidStart() {
      return {
        // After every didResolveOperation check has passed, before execution (and before the read admission).
        async responseForOperation({ contextValue }) {
          const slot = contextValue.operationCost;
          if (!slot || !contextValue.caller) return null;
          const requested = slot.requested ?? 0;
          let charge: BudgetCharge;
          try {
            charge = await budgets.charge(contextValue.caller, requested);
          } catch (error) {
            // Apollo does not catch this hook's errors: an outage is answered here, as the pipeline would.
            if (!isServiceUnavailable(error)) throw error;
            return refusal(503, UNAVAILABLE_RETRY_AFTER_SECONDS, SERVICE_UNAVAILABLE_MESSAGE, SERVICE_UNAVAILABLE);
          }
          slot.charge = charge;
          if (charge.granted) return null;
          return refusal(429, charge.retryAfterSeconds, throttledMessage(requested, charge), THROTTLED, {
            retryAfterSeconds: charge.retryAfterSeconds,
          });
        },
        async willSendResponse({ contextValue, document, operation, response }) {
          // contextValue is typed as present, but is a bare object when the context itself failed.
          const { caller, operationCost: slot } = contextValue as Partial<BudgetContext>;
          if (!slot || !caller || response.body.kind !== "single") return;
          const result = response.body.singleResult;
          const charge = slot.charge;
          let cost: PublishedCost | null;
          if (charge) {
            const actual =
              charge.granted && document && operation
                ? actualOperationCost(document, operation, result.data, charge.charged)
                : 0;
            cost = {
              requestedQueryCost: slot.requested ?? 0,
              actualQueryCost: actual,
              throttleStatus: charge.granted ? budgets.settle(caller, charge, actual) : charge.status,
            };
          } else {
            // Refused before the charge (parse, validation, a limit, an outage).
            cost = await costOfRefusal(budgets, caller);
            if (!cost) return;
          }
          // Last among the extensions: a response kept by the read cache is served again with its cost replaced.
          const { cost: _ignored, ...others } = result.extensions ?? {};
          result.extensions = { ...others, cost };
        },
      };
    },
  };
}
