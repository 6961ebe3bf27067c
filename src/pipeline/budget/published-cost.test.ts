import { describe, expect, it } from "@jest/globals";
import type { BudgetCharge } from "../../domain/budgets/cost-budget.ts";
import { throttledMessage } from "./published-cost.ts";

/** A refusal against a bucket of 100 that holds 27 and restores 2 per second. */
function refusal(retryAfterSeconds: number): BudgetCharge {
  return {
    granted: false,
    charged: 0,
    status: { maximumAvailable: 100, currentlyAvailable: 27, restoreRate: 2 },
    retryAfterSeconds,
  };
}

describe("the THROTTLED message", () => {
  it("says what the request costs and what the budget holds", () => {
    expect(throttledMessage(40, refusal(7))).toBe(
      "This request costs 40; the API key's budget holds 27 of 100 and restores 2 per second. Retry after 7 s.",
    );
  });

  it("says that a request costing more than the maximum is charged the maximum once the budget is full", () => {
    expect(throttledMessage(500, refusal(37))).toBe(
      "This request costs 500, more than the API key's budget can hold (100): it is charged 100 and runs once the " +
        "budget is full. The budget holds 27 and restores 2 per second. Retry after 37 s.",
    );
  });
});
