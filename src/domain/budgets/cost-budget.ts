/*
 * Cost budgets (docs/decisions.md, "Cost budgets"). Glossary:
 * - cost: what a request may make the server read, in the units of GraphQL's cost estimate (src/pipeline/documents/limits.ts);
 *   a REST request's cost is set by its route (src/rest/cost-budget-hooks.ts).
 * - bucket: each API key's budget, a leaky bucket. It holds at most `maximum`; it refills continuously at
 *   `restoreRate` per second. A request is charged its requested cost before it runs, refused when the bucket
 *   holds less, and refunded the part it did not use once it has run (its actual cost).
 * - level: what the bucket holds at a moment, refilled up to that moment.
 */

/** A bucket's size and refill rate: the server's defaults, or the key's own. */
export interface BudgetPolicy {
  readonly maximum: number;
  /** Cost units restored per second. */
  readonly restoreRate: number;
}

/** A key's own maximum and restore rate, each null when the server's default applies. */
export interface BudgetOverrides {
  readonly maximum: number | null;
  readonly restoreRate: number | null;
}

/** The bucket as a response reports it (GraphQL `extensions.cost.throttleStatus`, Shopify's names). */
export interface ThrottleStatus {
  readonly maximumAvailable: number;
  readonly currentlyAvailable: number;
  readonly restoreRate: number;
}

/** What became of a charge. */
export interface BudgetCharge {
  /** Whether the request may run. */
  readonly granted: boolean;
  /** What was charged: the requested cost (at most the bucket's maximum), or 0 when refused. */
  readonly charged: number;
  /** The bucket right after the charge. */
  readonly status: ThrottleStatus;
  /** Refused: whole seconds until the bucket holds enough (`Retry-After`); 0 when granted. */
  readonly retryAfterSeconds: number;
}

/** The policy of a key: its own values where set, the defaults elsewhere. */
export function resolvePolicy(defaults: BudgetPolicy, overrides: BudgetOverrides | undefined): BudgetPolicy {
  return {
    maximum: overrides?.maximum ?? defaults.maximum,
    restoreRate: overrides?.restoreRate ?? defaults.restoreRate,
  };
}

/**
 * What a request is charged for `cost`: at most the bucket's maximum, so that a request costing more than a
 * small bucket can hold waits for a full bucket instead of never running.
 */
export function chargeableCost(cost: number, policy: BudgetPolicy): number {
  return Math.min(Math.max(0, cost), policy.maximum);
}

/** The level `elapsedSeconds` after the bucket held `available`, plus what was given back since: at most the maximum. */
export function refilledLevel(available: number, elapsedSeconds: number, policy: BudgetPolicy, refunded = 0): number {
  return Math.min(policy.maximum, available + Math.max(0, elapsedSeconds) * policy.restoreRate + refunded);
}

/**
 * Whole seconds until a bucket holding `available` holds `cost`: the ceiling, so that a client that waits that long
 * finds enough (`Retry-After`). 0 when it holds enough already.
 */
export function secondsUntilAvailable(cost: number, available: number, policy: BudgetPolicy): number {
  if (available >= cost) return 0;
  if (policy.restoreRate <= 0) return Number.MAX_SAFE_INTEGER;
  // A hair below a whole second is that second: float error must not turn 3 s into 4.
  return Math.max(1, Math.ceil((cost - available) / policy.restoreRate - 1e-9));
}

/**
 * Charges in the order given against a bucket at `level`: each is granted while the sum granted so far, with it,
 * fits (a prefix: once one is refused, so are the ones after it, which keeps the order fair). Returns how many
 * were granted. The PostgreSQL ledger makes the same decision in SQL (src/store/sql/budget-ledger.ts).
 */
export function grantedPrefix(costs: readonly number[], level: number): number {
  let taken = 0;
  for (let index = 0; index < costs.length; index++) {
    taken += costs[index]!;
    if (taken > level) return index;
  }
  return costs.length;
}

/** The status a response reports: the level rounded down to a whole unit, never below 0. */
export function throttleStatus(available: number, policy: BudgetPolicy): ThrottleStatus {
  return {
    maximumAvailable: policy.maximum,
    currentlyAvailable: Math.max(0, Math.floor(available)),
    restoreRate: policy.restoreRate,
  };
}
