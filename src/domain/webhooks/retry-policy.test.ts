import { describe, expect, it } from "@jest/globals";
import { judgeAttempt, parseRetryAfter, withJitter } from "./retry-policy.ts";

const SCHEDULE = [0, 5_000, 300_000];
const NOW = new Date("2026-11-22T00:00:00.000Z");
const middle = () => 0.5;

describe("judgeAttempt", () => {
  it("treats any 2xx as success and 410 as gone", () => {
    expect(judgeAttempt({ statusCode: 204, retryAfterMs: null }, 1, SCHEDULE, NOW)).toEqual({ kind: "succeeded" });
    expect(judgeAttempt({ statusCode: 410, retryAfterMs: null }, 1, SCHEDULE, NOW)).toEqual({ kind: "gone" });
  });

  it("retries anything else on the schedule, then gives up after as many attempts as delays", () => {
    for (const statusCode of [null, 301, 400, 404, 500]) {
      expect(judgeAttempt({ statusCode, retryAfterMs: null }, 1, SCHEDULE, NOW, middle)).toEqual({
        kind: "retry",
        at: new Date(NOW.getTime() + 5_000),
      });
    }
    expect(judgeAttempt({ statusCode: 500, retryAfterMs: null }, 2, SCHEDULE, NOW, middle)).toEqual({
      kind: "retry",
      at: new Date(NOW.getTime() + 300_000),
    });
    expect(judgeAttempt({ statusCode: 500, retryAfterMs: null }, 3, SCHEDULE, NOW)).toEqual({ kind: "exhausted" });
  });

  it("honours Retry-After on 429 and 503 only, never sooner than the schedule", () => {
    const later = (statusCode: number, retryAfterMs: number) =>
      (judgeAttempt({ statusCode, retryAfterMs }, 1, SCHEDULE, NOW, middle) as { at: Date }).at.getTime() -
      NOW.getTime();
    expect(later(429, 60_000)).toBe(60_000);
    expect(later(503, 60_000)).toBe(60_000);
    expect(later(503, 1_000)).toBe(5_000);
    expect(later(500, 60_000)).toBe(5_000);
    expect(later(429, 10 * 24 * 3_600_000)).toBe(24 * 3_600_000);
  });
});

describe("withJitter", () => {
  it("stays within ±20% and keeps 'at once' at once", () => {
    expect(withJitter(10_000, () => 0)).toBe(8_000);
    expect(withJitter(10_000, () => 0.999999)).toBe(12_000);
    expect(withJitter(0, () => 0.7)).toBe(0);
  });
});

describe("parseRetryAfter", () => {
  it("reads delta-seconds and HTTP-dates", () => {
    expect(parseRetryAfter("120", NOW)).toBe(120_000);
    expect(parseRetryAfter("Sun, 22 Nov 2026 00:00:30 GMT", NOW)).toBe(30_000);
    expect(parseRetryAfter("Sat, 21 Nov 2026 00:00:30 GMT", NOW)).toBe(0);
    expect(parseRetryAfter("soon", NOW)).toBeNull();
    expect(parseRetryAfter("-5", NOW)).toBeNull();
    expect(parseRetryAfter(undefined, NOW)).toBeNull();
  });
});
