import type { BudgetLedger } from "./budget-ledger.ts";
import {
  chargeableCost,
  resolvePolicy,
  secondsUntilAvailable,
  throttleStatus,
  type BudgetCharge,
  type BudgetOverrides,
  type BudgetPolicy,
  type ThrottleStatus,
} from "./cost-budget.ts";

/** Whose bucket a request draws from: the authenticated caller's key (`Caller`). */
export interface BudgetHolder {
  readonly apiKeyId: string;
  /** The key's own maximum and restore rate; absent or null: the server's defaults. */
  readonly budget?: BudgetOverrides;
}

/**
 * Each API key's cost budget (cost-budget.ts has the glossary): GraphQL and REST charge a request before it runs
 * and settle it once it has. One budget per key across every instance on one PostgreSQL database; on SQLite, in the
 * process (budget-ledger.ts).
 */
export class CostBudgetService {
  constructor(
    private readonly ledger: BudgetLedger,
    /** COST_BUDGET_MAXIMUM and COST_BUDGET_RESTORE_RATE: the policy of a key without values of its own. */
    private readonly defaults: BudgetPolicy,
  ) {}

  /** The caller's bucket: its key's own values where an operator set them, the server's elsewhere. */
  policyOf(caller: BudgetHolder): BudgetPolicy {
    return resolvePolicy(this.defaults, caller.budget);
  }

  /**
   * Charges `requestedCost` to the caller's key before the request runs: granted when the bucket holds that much
   * (a cost over the bucket's maximum is charged the maximum), refused otherwise with the whole seconds until it
   * will (`retryAfterSeconds`). A cost of 0 reads the bucket without changing it.
   */
  async charge(caller: BudgetHolder, requestedCost: number): Promise<BudgetCharge> {
    const policy = this.policyOf(caller);
    const cost = chargeableCost(requestedCost, policy);
    const answer = await this.ledger.charge(caller.apiKeyId, policy, cost);
    return {
      granted: answer.granted,
      charged: answer.granted ? cost : 0,
      status: throttleStatus(answer.available, policy),
      retryAfterSeconds: answer.granted ? 0 : secondsUntilAvailable(cost, answer.available, policy),
    };
  }

  /**
   * Gives back what a granted charge took beyond `actualCost`, what the request really used; returns the bucket as
   * the response reports it.
   */
  settle(caller: BudgetHolder, charge: BudgetCharge, actualCost: number): ThrottleStatus {
    const refund = Math.max(0, charge.charged - Math.max(0, actualCost));
    if (refund === 0) return charge.status;
    const policy = this.policyOf(caller);
    this.ledger.refund(caller.apiKeyId, policy, refund);
    return {
      ...charge.status,
      currentlyAvailable: Math.min(policy.maximum, charge.status.currentlyAvailable + Math.floor(refund)),
    };
  }

  /** Applies refunds held back (PostgreSQL) before the database closes. */
  close(): Promise<void> {
    return this.ledger.close();
  }
}
