import type { WebhookEndpoint } from "./webhook-models.ts";

/**
 * Where the delivery worker's requests start, ordered with every change of their endpoints (docs/decisions.md,
 * "Endpoint changes stop the requests claimed ahead"). A claim reads its endpoints when it leases their
 * deliveries; a delivery may wait a while in the worker's queue before a slot frees, and its endpoint may be
 * updated, disabled or deleted meanwhile. The gate tells, just before the requests start, which endpoints
 * changed since they were read, under the guarantee below.
 */
export interface EndpointStartGate {
  /**
   * Calls `start` once with the endpoints, among `endpoints` (as a claim read them), whose stored version is
   * newer than the one given: each with its current row, or null when it was deleted. The endpoints not in the
   * map are unchanged. `start` must begin its requests before it returns (synchronously).
   *
   * Guarantee: a change of one of these endpoints committed before the check is in the map; a change that
   * commits after it is acknowledged only after `start` has returned. So once a change has been acknowledged,
   * no request begun by a later `start` follows the old state.
   * @throws when the check cannot be made (the database away; on PostgreSQL, a deadlock): `start` was not called.
   */
  startWithCurrent(
    endpoints: readonly WebhookEndpoint[],
    start: (changed: ReadonlyMap<string, WebhookEndpoint | null>) => void,
  ): Promise<void>;
}
