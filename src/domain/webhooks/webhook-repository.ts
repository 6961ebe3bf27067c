import type {
  DeliveryStatus,
  DroppedReason,
  EndpointRoute,
  WebhookAttempt,
  WebhookDelivery,
  WebhookDeliveryView,
  WebhookEndpoint,
} from "./webhook-models.ts";

/*
 * What webhooks need from persistence, implemented in src/store/sql/webhook-repository.ts (and the three files it names). It is reached as
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
  /**
   * This claim's lease token, written to `lease_owner`: unique per claim, so that an outcome (or a release) of an
   * older claim of the same delivery, arriving after its lease expired, never settles a newer one.
   */
  readonly owner: string;
  readonly now: Date;
  readonly leaseExpiresAt: Date;
  /** The most deliveries to claim in all. */
  readonly limit: number;
  /** The most deliveries one endpoint may get from this claim, for endpoints listed here (0 excludes one). */
  readonly perEndpointLimit: ReadonlyMap<string, number>;
  /** The same for every endpoint not listed. */
  readonly defaultPerEndpointLimit: number;
  /**
   * The most deliveries one organization's endpoints together may get from this claim, for organizations listed
   * (0 excludes one), and for every other (absent: no limit per organization). Per endpoint alone, a claim gave an
   * organization whose six endpoints never answer six times its endpoint's room, and with it every place the
   * worker claims ahead: no other organization's delivery was claimed until those requests timed out (issue 49.1).
   */
  readonly perOrganizationLimit?: ReadonlyMap<string, number>;
  readonly defaultPerOrganizationLimit?: number;
}

/**
 * A delivery as a claim leased it. `slotAt`: for a throttled endpoint, the instant its request may start at the
 * earliest (its slot on the endpoint's schedule, src/domain/webhooks/throttle-schedule.ts); null when the endpoint
 * has no throttle.
 */
export interface LeasedDelivery extends WebhookDelivery {
  readonly slotAt: Date | null;
}

/** The state a delivery moves to after an attempt. */
export interface DeliveryTransition {
  readonly at: Date;
  readonly status: DeliveryStatus;
  readonly attemptCount: number;
  readonly attemptsSinceQueued: number;
  readonly nextAttemptAt: Date | null;
}

/** A delivery as leased by one claim: its id and that claim's lease token. */
export interface DeliveryLease {
  readonly deliveryId: string;
  readonly leaseToken: string;
}

/** An attempt and the state its delivery moves to, under the lease of the claim that made it. */
export interface FinishedAttempt {
  readonly attempt: WebhookAttempt;
  readonly transition: DeliveryTransition;
  readonly leaseToken: string;
}

/** A claimed delivery whose earlier attempts were lost, counted (src/domain/webhooks/lost-attempts.ts). */
export interface CountedLostAttempts extends DeliveryLease {
  readonly transition: DeliveryTransition;
  /** True when this claim sends it now (the lease stays); false when it is settled unsent (the lease ends). */
  readonly keepsLease: boolean;
}

export interface WebhookRepository {
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
  findDelivery(organizationId: string, id: string): Promise<WebhookDeliveryView | null>;
  /** The organization's deliveries among `ids` (one query). */
  findDeliveriesByIds(organizationId: string, ids: readonly string[]): Promise<WebhookDeliveryView[]>;
  /** The attempts among `ids` of the organization's deliveries (one query). */
  findAttemptsByIds(organizationId: string, ids: readonly string[]): Promise<WebhookAttempt[]>;
  listDeliveries(query: DeliveryListQuery): Promise<WebhookDeliveryView[]>;
  /** Attempts of each delivery, oldest first; every given id is a key of the result. */
  findAttemptsByDeliveryIds(deliveryIds: readonly string[]): Promise<Map<string, WebhookAttempt[]>>;
  /**
   * Makes a delivery due at `at` again, whatever its status, with a fresh retry schedule (`attemptsSinceQueued`
   * back to 0); its `attemptCount` is kept.
   */
  requeueDelivery(id: string, at: Date): Promise<WebhookDelivery | null>;
  /**
   * Deletes up to `batchSize` deliveries that succeeded before `cutoff` (by their last change), with their
   * attempts; returns how many deliveries were deleted.
   */
  deleteSucceededDeliveriesBefore(cutoff: Date, batchSize: number): Promise<number>;
  countPendingDeliveries(): Promise<number>;

  /**
   * Leases due, unleased (or expired-lease) pending deliveries to `owner`, oldest due first, within the
   * limits. Concurrent claimers (other instances) never receive the same delivery while its lease holds. A
   * throttled endpoint's deliveries get consecutive slots of its schedule, shared by every instance.
   */
  claimDueDeliveries(request: ClaimRequest): Promise<LeasedDelivery[]>;
  /**
   * Records attempts and moves their deliveries to their transitions, those still leased by the item's lease
   * token (an attempt whose lease was lost is still recorded), in a few statements whatever their number.
   * Attempts of deliveries that no longer exist (deleted with their endpoint) are dropped. Returns the ids of the
   * deliveries that exist.
   */
  finishAttempts(items: readonly FinishedAttempt[]): Promise<Set<string>>;
  /** Moves these leased deliveries' counts (and states) by their lost attempts, in one statement. */
  countLostAttempts(items: readonly CountedLostAttempts[]): Promise<void>;
  /**
   * Ends a delivery without an attempt, with why (its endpoint was disabled, or its filters no longer take it);
   * a delivery of a deleted endpoint is gone already.
   */
  abandonDelivery(lease: DeliveryLease, at: Date, reason: DroppedReason): Promise<void>;
  /**
   * Fails the endpoint's pending deliveries that no instance is sending right now (those finish on their own
   * and are abandoned when claimed again), dropped as "endpoint_disabled". Returns how many were failed.
   */
  failPendingDeliveries(endpointIds: string | readonly string[], at: Date): Promise<number>;
  /**
   * Gives leases back (shutdown) so that another instance need not wait for them to expire. `attemptMade`: a
   * request went out (and was aborted), which counts as an attempt.
   */
  releaseDeliveries(leases: readonly DeliveryLease[], attemptMade: boolean): Promise<void>;

  /** Sets each endpoint's `failing_since` to its time unless it is set already. */
  markEndpointsFailing(since: ReadonlyMap<string, Date>): Promise<void>;
  /** Clears `failing_since` of these endpoints (after a success). */
  markEndpointsHealthy(ids: readonly string[]): Promise<void>;
  /**
   * Disables those of these endpoints that are enabled (and, with `failingSinceAtOrBefore`, have been failing
   * since that time or earlier) with `reason`; returns the ids it disabled.
   */
  disableEndpoints(ids: readonly string[], reason: string, at: Date, failingSinceAtOrBefore?: Date): Promise<string[]>;
}
