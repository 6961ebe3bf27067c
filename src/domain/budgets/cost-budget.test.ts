import { describe, expect, it } from "@jest/globals";
import { InProcessBudgetLedger } from "./budget-ledger.ts";
import { CostBudgetService } from "./cost-budget-service.ts";
import { chargeableCost, grantedPrefix, refilledLevel, secondsUntilAvailable, throttleStatus } from "./cost-budget.ts";

const policy = { maximum: 100, restoreRate: 4 };

describe("cost budget rules", () => {
  it("refills continuously up to the maximum, refunds included", () => {
    expect(refilledLevel(10, 2.5, policy)).toBe(20);
    expect(refilledLevel(90, 10, policy)).toBe(100);
    expect(refilledLevel(10, 0, policy, 5)).toBe(15);
    expect(refilledLevel(10, -3, policy)).toBe(10);
  });

  it("asks to wait the whole seconds until the bucket holds the cost", () => {
    expect(secondsUntilAvailable(10, 10, policy)).toBe(0);
    expect(secondsUntilAvailable(10, 9, policy)).toBe(1);
    expect(secondsUntilAvailable(10, 2, policy)).toBe(2);
    expect(secondsUntilAvailable(10, 1.9, policy)).toBe(3);
    expect(secondsUntilAvailable(0.3 + 0.6, 0, { maximum: 1, restoreRate: 0.3 })).toBe(3);
  });

  it("grants charges in order while they fit, and none after the first refused", () => {
    expect(grantedPrefix([3, 3, 3], 7)).toBe(2);
    expect(grantedPrefix([8, 1], 7)).toBe(0);
    expect(grantedPrefix([0, 7], 7)).toBe(2);
    expect(grantedPrefix([], 0)).toBe(0);
  });

  it("charges a cost over the maximum as the maximum, and reports whole units", () => {
    expect(chargeableCost(500, policy)).toBe(100);
    expect(chargeableCost(-1, policy)).toBe(0);
    expect(throttleStatus(7.9, policy)).toEqual({ maximumAvailable: 100, currentlyAvailable: 7, restoreRate: 4 });
  });
});

describe("CostBudgetService on the in-process ledger", () => {
  it("charges, refuses with Retry-After, and gives back what a request did not use", async () => {
    let now = 0;
    const budgets = new CostBudgetService(new InProcessBudgetLedger(() => now), policy);
    const holder = { apiKeyId: "key", budget: { maximum: 10, restoreRate: null } };
    const first = await budgets.charge(holder, 8);
    expect(first).toMatchObject({ granted: true, charged: 8, retryAfterSeconds: 0 });
    expect(budgets.settle(holder, first, 3).currentlyAvailable).toBe(7);
    const refused = await budgets.charge(holder, 9);
    expect(refused).toMatchObject({ granted: false, charged: 0, retryAfterSeconds: 1 });
    now += 500;
    expect((await budgets.charge(holder, 9)).granted).toBe(true);
  });
});
