import { grantedPrefix, refilledLevel, type BudgetPolicy } from "./cost-budget.ts";

/*
 * Where the buckets live: in the process on SQLite ({@link InProcessBudgetLedger}: one process owns the file), in
 * the database on PostgreSQL (src/store/sql/budget-ledger.ts: one bucket for every instance sharing it).
 */

/** A charge as the ledger decided it. */
export interface LedgerAnswer {
  readonly granted: boolean;
  /** What the bucket holds right after the charge (and after the other charges decided with it). */
  readonly available: number;
}

export interface BudgetLedger {
  /**
   * Refills the key's bucket to now, then takes `cost` from it if it holds that much: atomic, whatever else charges
   * the same key at the same time, here or (PostgreSQL) on another instance.
   */
  charge(apiKeyId: string, policy: BudgetPolicy, cost: number): Promise<LedgerAnswer>;
  /**
   * Gives back `amount` (never past the maximum). May be applied later, with the key's next charge: a refund
   * held back can only make the bucket hold less than it could, never more.
   */
  refund(apiKeyId: string, policy: BudgetPolicy, amount: number): void;
  /** Applies what is held back; the ledger is not used afterwards. */
  close(): Promise<void>;
}

interface Bucket {
  available: number;
  /** When `available` was measured, in milliseconds of `now`. */
  at: number;
}

/** The buckets of a SQLite server, in its process: a charge is decided at once, without a statement. */
export class InProcessBudgetLedger implements BudgetLedger {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly now: () => number = () => performance.now()) {}

  async charge(apiKeyId: string, policy: BudgetPolicy, cost: number): Promise<LedgerAnswer> {
    const bucket = this.refill(apiKeyId, policy);
    const granted = grantedPrefix([cost], bucket.available) === 1;
    if (granted) bucket.available -= cost;
    return { granted, available: bucket.available };
  }

  refund(apiKeyId: string, policy: BudgetPolicy, amount: number): void {
    if (amount <= 0) return;
    const bucket = this.refill(apiKeyId, policy);
    bucket.available = Math.min(policy.maximum, bucket.available + amount);
  }

  async close(): Promise<void> {}

  /** The key's bucket refilled to now; a key never seen starts full. */
  private refill(apiKeyId: string, policy: BudgetPolicy): Bucket {
    const now = this.now();
    let bucket = this.buckets.get(apiKeyId);
    if (!bucket) {
      bucket = { available: policy.maximum, at: now };
      this.buckets.set(apiKeyId, bucket);
      return bucket;
    }
    bucket.available = refilledLevel(bucket.available, (now - bucket.at) / 1000, policy);
    bucket.at = now;
    return bucket;
  }
}
