import { HeaderMap, type ApolloServerPlugin, type BaseContext } from "@apollo/server";
import type { CostBudgetService, BudgetHolder } from "../domain/budgets/cost-budget-service.ts";
import type { BudgetCharge } from "../domain/budgets/cost-budget.ts";
import { actualOperationCost } from "./actual-cost.ts";
import { THROTTLED, throttledMessage, type PublishedCost } from "./published-cost.ts";

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
): ApolloServerPlugin<Context> {
  return {
    async requestDidStart() {
      return {
        // After every didResolveOperation check has passed, before execution (and before the read admission).
        async responseForOperation({ contextValue }) {
          const slot = contextValue.operationCost;
          if (!slot || !contextValue.caller) return null;
          const requested = slot.requested ?? 0;
          const charge = await budgets.charge(contextValue.caller, requested);
          slot.charge = charge;
          if (charge.granted) return null;
          return {
            http: {
              status: 429,
              headers: new HeaderMap([["retry-after", String(charge.retryAfterSeconds)]]),
            },
            body: {
              kind: "single",
              singleResult: {
                errors: [
                  {
                    message: throttledMessage(requested, charge),
                    extensions: { code: THROTTLED, retryAfterSeconds: charge.retryAfterSeconds },
                  },
                ],
              },
            },
          };
        },
        async willSendResponse({ contextValue, document, operation, response }) {
          // contextValue is typed as present, but is a bare object when the context itself failed.
          const { caller, operationCost: slot } = contextValue as Partial<BudgetContext>;
          if (!slot || !caller || response.body.kind !== "single") return;
          const result = response.body.singleResult;
          let requested = slot.requested ?? 0;
          let charge = slot.charge;
          if (!charge) {
            // Refused before the charge (parse, validation, a limit): nothing ran, nothing is charged.
            requested = 0;
            charge = await budgets.charge(caller, 0);
          }
          const actual =
            charge.granted && document && operation
              ? actualOperationCost(document, operation, result.data, charge.charged)
              : 0;
          const cost: PublishedCost = {
            requestedQueryCost: requested,
            actualQueryCost: actual,
            throttleStatus: charge.granted ? budgets.settle(caller, charge, actual) : charge.status,
          };
          // Last among the extensions: a response kept by the read cache is served again with its cost replaced.
          const { cost: _ignored, ...others } = result.extensions ?? {};
          result.extensions = { ...others, cost };
        },
      };
    },
  };
}
