/*
 * What happens after an attempt: a 2xx is a success; 410 Gone stops the delivery and disables the
 * endpoint; anything else is retried on the schedule until it runs out. Pure functions, so that the schedule,
 * the jitter and Retry-After are tested without a server.
 */

/** What one HTTP attempt produced, as far as the rules care. */
export interface AttemptOutcome {
  /** null when no response arrived (timeout, connection error, refused target). */
  readonly statusCode: number | null;
  /** The receiver's Retry-After, in milliseconds from now; only read on 429 and 503. */
  readonly retryAfterMs: number | null;
}

export type AttemptVerdict =
  | { readonly kind: "succeeded" }
  | { readonly kind: "retry"; readonly at: Date }
  | { readonly kind: "exhausted" }
  | { readonly kind: "gone" };

/** Retry delays vary by ±20%, so that deliveries failing together do not all come back at the same instant. */
export const JITTER_RATIO = 0.2;

/** A Retry-After longer than this is capped: a receiver cannot park a delivery for ever. */
export const MAX_RETRY_AFTER_MS = 24 * 60 * 60 * 1000;

export function isSuccessStatus(statusCode: number | null): boolean {
  return statusCode !== null && statusCode >= 200 && statusCode < 300;
}

/**
 * The verdict on a delivery's `attemptsMade`-th attempt (1-based). `scheduleMs[n]` is the delay before
 * attempt n + 1, counted from the failure of attempt n (`scheduleMs[0]`, before the first attempt, is applied
 * when the delivery is queued), so a schedule of N delays allows N attempts.
 * `random` returns a number in [0, 1); tests pass a fixed one.
 */
export function judgeAttempt(
  outcome: AttemptOutcome,
  attemptsMade: number,
  scheduleMs: readonly number[],
  now: Date,
  random: () => number = Math.random,
): AttemptVerdict {
  if (isSuccessStatus(outcome.statusCode)) return { kind: "succeeded" };
  if (outcome.statusCode === 410) return { kind: "gone" };
  if (attemptsMade >= scheduleMs.length) return { kind: "exhausted" };
  let delay = withJitter(scheduleMs[attemptsMade]!, random);
  if ((outcome.statusCode === 429 || outcome.statusCode === 503) && outcome.retryAfterMs !== null) {
    // Honour the receiver's wish, but never come back sooner than the schedule would.
    delay = Math.max(delay, Math.min(outcome.retryAfterMs, MAX_RETRY_AFTER_MS));
  }
  return { kind: "retry", at: new Date(now.getTime() + delay) };
}

export function withJitter(delayMs: number, random: () => number = Math.random): number {
  return Math.round(delayMs * (1 - JITTER_RATIO + 2 * JITTER_RATIO * random()));
}

/**
 * Retry-After as milliseconds from `now`: delta-seconds (`120`) or an HTTP-date. Null when absent or
 * unreadable; a date in the past is 0.
 */
export function parseRetryAfter(header: string | undefined, now: Date): number | null {
  if (header === undefined) return null;
  const text = header.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  if (Number.isNaN(date) || !/[a-z]/i.test(text)) return null;
  return Math.max(0, date - now.getTime());
}
