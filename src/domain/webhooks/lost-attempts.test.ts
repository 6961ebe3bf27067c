import { describe, expect, it } from "@jest/globals";
import { judgeLostAttempts } from "./lost-attempts.ts";
import type { WebhookDelivery } from "./webhook-models.ts";

const SCHEDULE = [0, 5_000, 300_000];
const LOST_AT = new Date("2026-11-22T00:00:00.000Z");
const middle = () => 0.5;

function delivery(attemptsSinceQueued: number, attemptCount = attemptsSinceQueued): WebhookDelivery {
  return {
    id: "d1",
    organizationId: "o1",
    endpointId: "e1",
    eventId: "v1",
    eventType: "reference_created",
    body: "{}",
    status: "pending",
    attemptCount,
    attemptsSinceQueued,
    nextAttemptAt: LOST_AT,
    leaseOwner: "instance:claim",
    leaseExpiresAt: new Date(LOST_AT.getTime() + 30_000),
    createdAt: LOST_AT,
    updatedAt: LOST_AT,
    orderingKey: null,
    eventOccurredAt: null,
    droppedReason: null,
  };
}

const at = (ms: number) => new Date(LOST_AT.getTime() + ms);
const lost = [{ deliveryId: "d1", attemptedAt: LOST_AT }];

describe("judgeLostAttempts", () => {
  it("counts a lost attempt and sends at once when its retry is due", () => {
    expect(judgeLostAttempts(delivery(0, 4), lost, SCHEDULE, at(30_000), middle)).toEqual({
      kind: "send",
      delivery: expect.objectContaining({ attemptCount: 5, attemptsSinceQueued: 1 }),
    });
  });

  it("puts the delivery back until its retry, counted from the lost attempt, is due", () => {
    expect(judgeLostAttempts(delivery(1), lost, SCHEDULE, at(30_000), middle)).toEqual({
      kind: "settle",
      transition: {
        at: at(30_000),
        status: "pending",
        attemptCount: 2,
        attemptsSinceQueued: 2,
        nextAttemptAt: at(300_000),
      },
    });
  });

  it("gives the delivery up once the schedule has run out", () => {
    expect(judgeLostAttempts(delivery(2), lost, SCHEDULE, at(30_000), middle)).toEqual({
      kind: "settle",
      transition: { at: at(30_000), status: "failed", attemptCount: 3, attemptsSinceQueued: 3, nextAttemptAt: null },
    });
  });
});
