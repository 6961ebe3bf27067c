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

/**
 * The message of a THROTTLED refusal. A request that costs more than the bucket can ever hold is charged the
 * maximum (src/domain/budgets/cost-budget.ts, `chargeableCost`): the message says so, and that it runs once the
 * bucket is full, so that a client does not conclude it can never run.
 */
export function throttledMessage(requested: number, charge: BudgetCharge): string {
  const { currentlyAvailable, maximumAvailable, restoreRate } = charge.status;
  const cost =
    requested > maximumAvailable
      ? `This request costs ${requested}, more than the API key's budget can hold (${maximumAvailable}): it is ` +
        `charged ${maximumAvailable} and runs once the budget is full. The budget holds ${currentlyAvailable} `
      : `This request costs ${requested}; the API key's budget holds ${currentlyAvailable} of ${maximumAvailable} `;
  return `${cost}and restores ${restoreRate} per second. Retry after ${charge.retryAfterSeconds} s.`;
}

/** The name of the one policy the REST fields advertise. */
const POLICY = '"default"';

/**
 * `RateLimit-Policy`: the quota `q` is the bucket's maximum and the window `w` the whole seconds it takes to
 * restore it from empty. Units are cost units, not requests (docs/graphql.md, "Cost budgets").
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
