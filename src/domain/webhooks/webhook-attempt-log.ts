import type { LostAttempt } from "./lost-attempts.ts";

/*
 * Every send is in the attempt log, even one whose outcome is lost (docs/decisions.md, "Attempts opened before
 * the send"). A claimed delivery gets an open attempt row (no status, `IN_FLIGHT`) in the claim itself, before
 * any request goes out; recording the outcome completes that same row. A delivery handed back unsent drops its
 * row. When a delivery is claimed again after its lease expired, an open row left by the instance that held it
 * is closed as `OUTCOME_LOST`: that request may or may not have reached the endpoint, and the log says so; it
 * counts as an attempt (src/domain/webhooks/lost-attempts.ts).
 */

export const IN_FLIGHT = "in flight: the outcome is not recorded yet";
export const OUTCOME_LOST =
  "outcome unknown: the instance sending it stopped or lost its lease before recording the answer " +
  "(the request may or may not have reached the endpoint)";

/** An attempt opened for a claimed delivery. */
export interface OpenAttempt {
  readonly id: string;
  readonly deliveryId: string;
  readonly openedAt: Date;
}

export interface WebhookAttemptLog {
  /** Closes the open attempts of these deliveries as `OUTCOME_LOST` (left by an expired lease) and returns them. */
  closeLost(deliveryIds: readonly string[]): Promise<LostAttempt[]>;
  /** Opens these attempts (after `closeLost` of their deliveries). */
  open(attempts: readonly OpenAttempt[]): Promise<void>;
  /** Deletes these open attempts (their deliveries were handed back unsent). */
  drop(attemptIds: readonly string[]): Promise<void>;
  /** Closes these open attempts as `OUTCOME_LOST` (a request aborted while in flight). */
  close(attemptIds: readonly string[]): Promise<void>;
}
