import { ANSWER_NOT_STORED } from "./attempt-text.ts";
import type { AttemptVerdict } from "./retry-policy.ts";
import type { WebhookDelivery, WebhookEndpoint } from "./webhook-models.ts";

/*
 * What the worker and the delivery rules (webhook-delivery-service.ts) hand each other: a delivery claimed by this
 * instance, what the sender observed of one attempt, and what recording it decided.
 */

/** A delivery leased to this instance, with its endpoint as it was when claimed (null if it was deleted). */
export interface ClaimedDelivery {
  readonly delivery: WebhookDelivery;
  readonly endpoint: WebhookEndpoint | null;
  /** The attempt opened for it by the claim (src/domain/webhooks/webhook-attempt-log.ts), completed by its outcome. */
  readonly attemptId: string;
  /** The claim's own token in `lease_owner`: what its outcome, release or abandon must still find there. */
  readonly leaseToken: string;
  /**
   * For a throttled endpoint, the slot the claim gave the delivery on the endpoint's schedule
   * (throttle-schedule.ts): its request may begin at that instant at the earliest, and only within the start
   * tolerance after it (else `isOnSchedule` is false and it is handed back, unsent and uncounted). Null when the
   * endpoint has no throttle.
   */
  readonly slotAt: Date | null;
}

/** What the sender observed. */
export interface AttemptReport {
  readonly attemptedAt: Date;
  readonly statusCode: number | null;
  readonly error: string | null;
  readonly latencyMs: number;
  readonly responseBody: string | null;
  readonly retryAfterMs: number | null;
}

export interface AttemptToRecord {
  readonly claimed: ClaimedDelivery;
  readonly report: AttemptReport;
}

/**
 * The same outcome without the receiver's text: what is recorded when the outcome as received could not be
 * written, so that the delivery is still settled (its attempt counted, its state moved) instead of sent again.
 */
export function withoutReceiverText(item: AttemptToRecord): AttemptToRecord {
  return { ...item, report: { ...item.report, error: ANSWER_NOT_STORED, responseBody: null } };
}

export interface AttemptResult {
  readonly verdict: AttemptVerdict;
  /** Set when this attempt disabled the endpoint: why. */
  readonly disabledReason: string | null;
}
