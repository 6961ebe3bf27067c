import type {
  DeliveryStatus,
  EndpointRoute,
  WebhookAttempt,
  WebhookDelivery,
  WebhookEndpoint,
} from "./webhook-models.ts";

/*
 * What webhooks need from persistence, implemented in src/store/webhook-store.ts. It is reached as
 * `store.webhooks` of a `Store`, so that inside `store.transaction` it writes in the same transaction (the
 * outbox rows of an event are written with the event).
 */

export interface DeliveryListQuery {
  readonly endpointId: string;
  readonly status?: DeliveryStatus;
  /** keyset: ids are UUIDv7, newest first, so "after" means id < beforeId */
  readonly beforeId?: string;
  readonly limit: number;
}

export interface ClaimRequest {
  /** The claiming instance, written to `lease_owner`. */
  readonly owner: string;
  readonly now: Date;
  readonly leaseExpiresAt: Date;
  /** The most deliveries to claim in all. */
  readonly limit: number;
  /** The most deliveries one endpoint may get from this claim, for endpoints listed here (0 excludes one). */
  readonly perEndpointLimit: ReadonlyMap<string, number>;
  /** The same for every endpoint not listed. */
  readonly defaultPerEndpointLimit: number;
}

/** The state a delivery moves to after an attempt. */
export interface DeliveryTransition {
  readonly at: Date;
  readonly status: DeliveryStatus;
  readonly attemptCount: number;
  readonly nextAttemptAt: Date | null;
}

export interface SucceededAttempt {
  readonly attempt: WebhookAttempt;
  /** The delivery's attempt count, this attempt included. */
  readonly attemptCount: number;
}

export interface WebhookStore {
  /** Inserts the endpoint without its tag filter rows: write those with `replaceEndpointTags`. */
  insertEndpoint(endpoint: WebhookEndpoint): Promise<void>;
  /**
   * Replaces the endpoint's tag filter rows with those of `tagIds` that are tags of the organization (the
   * insert picks them itself) and returns the ids it wrote: an id missing from the result is unknown (or was deleted
   * concurrently), so the caller can refuse it and roll back. Run it inside the transaction that writes the
   * endpoint.
   */
  replaceEndpointTags(organizationId: string, endpointId: string, tagIds: readonly string[]): Promise<string[]>;
  findEndpoint(organizationId: string, id: string): Promise<WebhookEndpoint | null>;
  /**
   * Reads an endpoint and holds it until the transaction ends, so that read-modify-writes of one endpoint
   * (rotations, updates) run one after another and none writes back a secret read before another's rotation.
   * Only inside `store.transaction`.
   */
  lockEndpoint(organizationId: string, id: string): Promise<WebhookEndpoint | null>;
  findEndpointsByIds(ids: readonly string[]): Promise<WebhookEndpoint[]>;
  /** The organization's enabled endpoints with their filters, in one statement: what the outbox routes by. */
  findEnabledEndpoints(organizationId: string): Promise<EndpointRoute[]>;
  countEndpoints(organizationId: string): Promise<number>;
  /** Newest first. */
  listEndpoints(organizationId: string, beforeId: string | undefined, limit: number): Promise<WebhookEndpoint[]>;
  updateEndpoint(endpoint: WebhookEndpoint): Promise<void>;
  /** Deletes the endpoint with its deliveries and their attempts. */
  deleteEndpoint(organizationId: string, id: string): Promise<boolean>;

  insertDeliveries(deliveries: readonly WebhookDelivery[]): Promise<void>;
  findDelivery(organizationId: string, id: string): Promise<WebhookDelivery | null>;
  /** The organization's deliveries among `ids` (one query). */
  findDeliveriesByIds(organizationId: string, ids: readonly string[]): Promise<WebhookDelivery[]>;
  /** The attempts among `ids` of the organization's deliveries (one query). */
  findAttemptsByIds(organizationId: string, ids: readonly string[]): Promise<WebhookAttempt[]>;
  listDeliveries(query: DeliveryListQuery): Promise<WebhookDelivery[]>;
  /** Attempts of each delivery, oldest first; every given id is a key of the result. */
  findAttemptsByDeliveryIds(deliveryIds: readonly string[]): Promise<Map<string, WebhookAttempt[]>>;
  /** Makes a delivery due at `at` again, whatever its status, with a fresh retry schedule. */
  requeueDelivery(id: string, at: Date): Promise<WebhookDelivery | null>;
  countPendingDeliveries(): Promise<number>;

  /**
   * Leases due, unleased (or expired-lease) pending deliveries to `owner`, oldest due first, within the
   * limits. Concurrent claimers (other instances) never receive the same delivery while its lease holds.
   */
  claimDueDeliveries(request: ClaimRequest): Promise<WebhookDelivery[]>;
  /**
   * Records an attempt and moves the delivery to `transition`, provided `owner` still holds its lease (if the
   * lease was lost, the attempt is still recorded). Returns false when the delivery no longer exists.
   */
  finishAttempt(attempt: WebhookAttempt, owner: string, transition: DeliveryTransition): Promise<boolean>;
  /**
   * The batch form of `finishAttempt` for attempts that succeeded: records them and marks their deliveries
   * succeeded (those `owner` still leases). Attempts of deliveries that no longer exist are dropped.
   */
  finishSucceededAttempts(items: readonly SucceededAttempt[], owner: string, at: Date): Promise<void>;
  /** Ends a delivery without an attempt (its endpoint was disabled or deleted meanwhile). */
  abandonDelivery(id: string, owner: string, at: Date): Promise<void>;
  /**
   * Fails the endpoint's pending deliveries that no instance is sending right now (those finish on their own
   * and are abandoned when claimed again). Returns how many were failed.
   */
  failPendingDeliveries(endpointId: string, at: Date): Promise<number>;
  /** Gives leases back (shutdown) so that another instance need not wait for them to expire. */
  releaseDeliveries(ids: readonly string[], owner: string): Promise<void>;

  /** Sets `failing_since` to `at` unless it is set already. */
  markEndpointFailing(id: string, at: Date): Promise<void>;
  /** Clears `failing_since` of these endpoints (after a success). */
  markEndpointsHealthy(ids: readonly string[]): Promise<void>;
  /**
   * Disables an enabled endpoint with `reason`; with `failingSinceAtOrBefore`, only when it has been failing
   * since that time or earlier. Returns whether it was disabled by this call.
   */
  disableEndpoint(id: string, reason: string, at: Date, failingSinceAtOrBefore?: Date): Promise<boolean>;
}
