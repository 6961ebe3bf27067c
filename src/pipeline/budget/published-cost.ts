import type { BudgetCharge, ThrottleStatus } from "../../domain/budgets/cost-budget.ts";

/*
 * What a response says of its cost, on every transport: GraphQL `extensions.cost` (Shopify's shape), the GraphQL
 * and REST THROTTLED refusals, and the REST `RateLimit-Policy` / `RateLimit` fields
 * (draft-ietf-httpapi-ratelimit-headers-11).
 */

/** GraphQL's `extensions.cost`. */
export interface PublishedCost {
  readonly requestedQueryCost: number;
  readonly actualQueryCost: number;
  readonly throttleStatus: ThrottleStatus;
}

/** The code of a request refused because its key's budget holds less than it costs. */
export const THROTTLED = "THROTTLED";

/** The message of a THROTTLED refusal. */
export function throttledMessage(requested: number, charge: BudgetCharge): string {
  return (
    `This request costs ${requested}; the API key's budget holds ${charge.status.currentlyAvailable} of ` +
    `${charge.status.maximumAvailable} and restores ${charge.status.restoreRate} per second. ` +
    `Retry after ${charge.retryAfterSeconds} s.`
  );
}

/** The name of the one policy the REST fields advertise. */
const POLICY = '"default"';

/**
 * `RateLimit-Policy`: the quota `q` is the bucket's maximum and the window `w` the whole seconds it takes to
 * restore it from empty. Units are cost units, not requests (README, "Cost budgets").
 */
export function rateLimitPolicyField(status: ThrottleStatus): string {
  const window = Math.max(1, Math.ceil(status.maximumAvailable / status.restoreRate));
  return `${POLICY};q=${Math.floor(status.maximumAvailable)};w=${window}`;
}

/** `RateLimit`: `r` what the bucket holds now, `t` the whole seconds until it is full again. */
export function rateLimitField(status: ThrottleStatus): string {
  const missing = Math.max(0, status.maximumAvailable - status.currentlyAvailable);
  const untilFull = missing === 0 ? 0 : Math.ceil(missing / status.restoreRate);
  return `${POLICY};r=${status.currentlyAvailable};t=${untilFull}`;
}

/**
 * A GraphQL response's JSON text with `cost` as the last member of its `extensions` (where the budget's plugin puts
 * it), for an answer written before the plugin could: a document refused on the route (src/graphql/graphql-server.ts).
 */
export function withPublishedCost(payload: string, cost: PublishedCost): string {
  const { extensions, ...response } = JSON.parse(payload) as { extensions?: Record<string, unknown> };
  return `${JSON.stringify({ ...response, extensions: { ...extensions, cost } })}\n`;
}
