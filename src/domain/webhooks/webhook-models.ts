import type { LifecycleEventType } from "../lifecycle/lifecycle-event.ts";
import type { WebhookSigning } from "./signing-keys.ts";
import type { BrokerDestination } from "./webhook-destination.ts";

/*
 * Webhooks. Glossary:
 * - endpoint: a URL of an organization that receives events, with its signing secret(s) and event-type filter;
 * - delivery: one event for one endpoint (the outbox row). Its id is the `webhook-id` header, stable across
 *   retries, and its `body` is the exact text sent on every attempt;
 * - attempt: one HTTP request of a delivery, with its outcome;
 * - lease: a claim on a delivery by one worker instance until `leaseExpiresAt`; an expired lease is free again.
 */

/** The `type` of the event sent by "send a test event"; it is not a lifecycle event type. */
export const TEST_EVENT_TYPE = "webhook_test";

export const DELIVERY_STATUSES = ["pending", "succeeded", "failed"] as const;
/** pending: waiting for its next attempt (or being sent); succeeded: a 2xx was received; failed: given up. */
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];

/** A signing secret replaced by a rotation: it keeps signing until `expiresAt` (24 hours after the rotation). */
export interface PreviousSecret {
  readonly secret: string;
  readonly expiresAt: Date;
}

export interface WebhookEndpoint {
  readonly id: string;
  readonly organizationId: string;
  /** The HTTP(S) URL; null when the endpoint delivers to a message broker (`destination`). */
  readonly url: string | null;
  /**
   * A message broker the endpoint publishes to instead of `url` (SPEC §9.3), with its URL's credentials in plain
   * text here (encrypted at rest like the secrets); null for an HTTP endpoint.
   */
  readonly destination: BrokerDestination | null;
  /** null: every event type. */
  readonly eventTypes: readonly LifecycleEventType[] | null;
  /**
   * The tag filter: null, no filter (every reference); otherwise only events whose reference carried one of
   * these tags when the event was written (its tag snapshot). Deleting a tag removes it from every filter, so
   * an empty array is a filter whose tags were all deleted: it matches nothing (see `tagFilterStateOf`).
   */
  readonly tagIds: readonly string[] | null;
  readonly description: string | null;
  readonly enabled: boolean;
  /** Why the service disabled the endpoint (410, failing too long); null when enabled or disabled by hand. */
  readonly disabledReason: string | null;
  /**
   * The signing key: `whsec_` + base64 (HMAC) or `whsk_` + base64 (an ed25519 private key), as `signing` says.
   * Signing needs the key itself, so the store keeps it encrypted, not hashed (see docs/decisions.md); here it is
   * plain. Never logged, never read back through the API.
   */
  readonly secret: string;
  /** How requests are signed; fixed at creation (src/domain/webhooks/signing-keys.ts). */
  readonly signing: WebhookSigning;
  /** The ed25519 public key of `secret` (`whpk_` + base64 of its 32 bytes), readable; null for HMAC. */
  readonly publicKey: string | null;
  /**
   * The most deliveries the endpoint receives in one second, counted across every instance sharing the database
   * (the claim decides, see `ClaimRequest`); null: no throttle.
   */
  readonly maxDeliveriesPerSecond: number | null;
  /** Keys rotated out that still sign beside `secret` until their own expiry, newest first. */
  readonly previousSecrets: readonly PreviousSecret[];
  /** The expiry of the newest secret rotated out (the API shows it); null before the first rotation. */
  readonly previousSecretExpiresAt: Date | null;
  /** The time of the first failed attempt since the last success; null while the endpoint succeeds. */
  readonly failingSince: Date | null;
  /** How the endpoint's deliveries are ordered; applies to deliveries queued from when it is set. */
  readonly ordering: WebhookOrdering;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  /**
   * Raised by every change of the row that decides where and how its requests go (any update, a rotation, a
   * disable by the worker): the worker compares it, just before a request starts, with the one its claim read.
   */
  readonly version: number;
}

export const WEBHOOK_ORDERINGS = ["none", "reference"] as const;
/**
 * none: deliveries go out as soon as they are due, in parallel; reference: the deliveries of one reference's
 * events go out one at a time, in the log's order (see `WebhookDelivery.orderingKey`).
 */
export type WebhookOrdering = (typeof WEBHOOK_ORDERINGS)[number];

export const TAG_FILTER_STATES = ["none", "active", "empty"] as const;
/** none: no tag filter; active: a filter with tags; empty: every tag of the filter was deleted, nothing matches. */
export type TagFilterState = (typeof TAG_FILTER_STATES)[number];

export function tagFilterStateOf(endpoint: Pick<WebhookEndpoint, "tagIds">): TagFilterState {
  if (endpoint.tagIds === null) return "none";
  return endpoint.tagIds.length > 0 ? "active" : "empty";
}

/** What the outbox needs of an enabled endpoint to decide whether an event goes to it. */
export type EndpointRoute = Pick<WebhookEndpoint, "id" | "eventTypes" | "tagIds" | "ordering">;

export interface WebhookDelivery {
  readonly id: string;
  readonly organizationId: string;
  readonly endpointId: string;
  /** The event's id (the body's `id`); for a test event, a fresh id. */
  readonly eventId: string;
  readonly eventType: string;
  readonly body: string;
  readonly status: DeliveryStatus;
  /**
   * Attempts whose outcome was recorded or lost (src/domain/webhooks/lost-attempts.ts), over the delivery's whole
   * life: a re-send by hand, a recovery or a replay does not reset it, so it equals the finished attempts its log
   * lists.
   */
  readonly attemptCount: number;
  /**
   * Attempts since the delivery was last (re)queued (created, re-sent, recovered or replayed): the position in
   * the retry schedule, which each requeue starts again from its first step.
   */
  readonly attemptsSinceQueued: number;
  /** When the next attempt is due; null once the delivery succeeded or failed. */
  readonly nextAttemptAt: Date | null;
  readonly leaseOwner: string | null;
  readonly leaseExpiresAt: Date | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  /**
   * The reference whose log order this delivery keeps: it is not sent while an earlier delivery (by
   * `eventOccurredAt`, then `eventId`) of the same endpoint and key is pending. Null: sent as soon as due
   * (unordered endpoints, test events, re-sends and recoveries).
   */
  readonly orderingKey: string | null;
  /** The event's time (with `eventId`, its place in the log); null for test events. */
  readonly eventOccurredAt: Date | null;
  /**
   * Why the delivery was dropped unsent (status "failed", no attempt for it): decided just before it would have
   * started, with its endpoint as it was then. Null when it was not; a re-send, recovery or replay clears it.
   */
  readonly droppedReason: DroppedReason | null;
}

/**
 * endpoint_disabled: the endpoint was disabled (by hand, a 410, a failure streak) before the delivery started;
 * filter_excluded: the endpoint's filters (event types, tags) no longer take the delivery's event.
 */
export const DROPPED_REASONS = ["endpoint_disabled", "filter_excluded"] as const;
export type DroppedReason = (typeof DROPPED_REASONS)[number];

export interface WebhookAttempt {
  readonly id: string;
  readonly deliveryId: string;
  readonly attemptedAt: Date;
  /** The HTTP status received; null when no response arrived (timeout, refused target, connection error). */
  readonly statusCode: number | null;
  /** Why the attempt failed without a status, or a note such as "redirect not followed". */
  readonly error: string | null;
  readonly latencyMs: number;
  /** The first 2 KB of the response body, decoded as UTF-8. */
  readonly responseBody: string | null;
}

/** A delivery as the API reads it: with what its reference's order does to it now. */
export interface WebhookDeliveryView extends WebhookDelivery {
  /**
   * Pending and not sent although its time may have come, for the reason `heldBackReason` gives. Computed as the
   * delivery is read.
   */
  readonly heldBack: boolean;
  /**
   * Why it waits: "ordering", behind an earlier delivery of its reference (`orderingKey`) to the same endpoint that
   * is still pending (it is not sent, whatever `nextAttemptAt` says, until that one succeeds or fails);
   * "throttled", due but its endpoint's throttle schedule has no slot left before a later time (it goes out in a
   * later slot, src/domain/webhooks/throttle-schedule.ts). Null when `heldBack` is false.
   */
  readonly heldBackReason: HeldBackReason | null;
}

export const HELD_BACK_REASONS = ["ordering", "throttled"] as const;
export type HeldBackReason = (typeof HELD_BACK_REASONS)[number];

export interface WebhookDeliveryWithAttempts extends WebhookDeliveryView {
  /** Oldest first. */
  readonly attempts: readonly WebhookAttempt[];
}
