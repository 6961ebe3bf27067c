import { judgeAttempt } from "./retry-policy.ts";
import type { WebhookDelivery } from "./webhook-models.ts";
import type { DeliveryTransition } from "./webhook-repository.ts";

/*
 * An attempt whose outcome was lost (the instance sending it stopped, or could not write the answer, before its
 * lease expired) counts as a failed attempt with no status: it moves `attemptCount` and the retry schedule like
 * any failure. Without this a delivery whose outcome is always lost (an answer the log refuses, an instance that
 * dies on it) was sent again at every lease expiry, for ever. It is found when the delivery is claimed again:
 * the claim closes the open attempt the lease left behind (src/domain/webhooks/webhook-attempt-log.ts).
 */

/** An open attempt closed as lost by a claim. */
export interface LostAttempt {
  readonly deliveryId: string;
  /** When it was opened: its delivery's retry delay counts from here. */
  readonly attemptedAt: Date;
}

/**
 * What a claim does with a delivery whose earlier attempts were lost: send it now, counted (its retry was due by
 * now), or settle it without sending: given up when the schedule has run out, or put back until its retry is due.
 */
export type LostAttemptsVerdict =
  | { readonly kind: "send"; readonly delivery: WebhookDelivery }
  | { readonly kind: "settle"; readonly transition: DeliveryTransition };

export function judgeLostAttempts(
  delivery: WebhookDelivery,
  lost: readonly LostAttempt[],
  scheduleMs: readonly number[],
  now: Date,
  random: () => number,
): LostAttemptsVerdict {
  const attemptCount = delivery.attemptCount + lost.length;
  const attemptsSinceQueued = delivery.attemptsSinceQueued + lost.length;
  const lastAt = new Date(Math.max(...lost.map((attempt) => attempt.attemptedAt.getTime())));
  const verdict = judgeAttempt(
    { statusCode: null, retryAfterMs: null },
    attemptsSinceQueued,
    scheduleMs,
    lastAt,
    random,
  );
  if (verdict.kind === "retry" && verdict.at <= now)
    return { kind: "send", delivery: { ...delivery, attemptCount, attemptsSinceQueued } };
  const transition: DeliveryTransition =
    verdict.kind === "retry"
      ? { at: now, status: "pending", attemptCount, attemptsSinceQueued, nextAttemptAt: verdict.at }
      : { at: now, status: "failed", attemptCount, attemptsSinceQueued, nextAttemptAt: null };
  return { kind: "settle", transition };
}
