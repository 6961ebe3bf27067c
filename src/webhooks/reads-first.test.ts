import { describe, expect, it } from "@jest/globals";
import type { ClaimedDelivery } from "../domain/webhooks/delivery-attempts.ts";
import { DeliverySlots } from "./delivery-slots.ts";
import { ReadsFirst } from "./reads-first.ts";

/*
 * The worker's choice of what to start while API reads wait (reads-first.ts over delivery-slots.ts): backlog
 * deliveries yield, live ones do not.
 */

const NOW = Date.parse("2026-11-27T12:00:00Z");
let serial = 0;

/** A claimed delivery of `endpointId` whose event occurred `ageMs` before NOW (null: a test event). */
function claimed(endpointId: string, ageMs: number | null): ClaimedDelivery {
  serial += 1;
  return {
    delivery: {
      id: `delivery-${serial}`,
      endpointId,
      organizationId: "organization",
      eventOccurredAt: ageMs === null ? null : new Date(NOW - ageMs),
      droppedReason: null,
      leaseExpiresAt: new Date(NOW + 60_000),
    },
    endpoint: null,
    attemptId: `attempt-${serial}`,
    leaseToken: "token",
    slotAt: null,
  } as unknown as ClaimedDelivery;
}

function round(slots: DeliverySlots, readsFirst: ReadsFirst) {
  return slots.takeRound({ holds: readsFirst.holdsForRound(NOW), startable: () => true });
}

const LIMITS = { concurrency: 50, concurrencyPerOrganization: 50, concurrencyPerEndpoint: 10 };

const ids = (deliveries: readonly ClaimedDelivery[]) => deliveries.map((item) => item.delivery.id);

describe("backlog yields to waiting reads", () => {
  it("starts every delivery while no read waits", () => {
    const slots = new DeliverySlots(LIMITS);
    const backlog = [claimed("a", 3_600_000), claimed("a", 3_600_000), claimed("b", 60_000), claimed("c", 31_000)];
    slots.enqueue(backlog);
    const taken = round(slots, new ReadsFirst(() => false));
    expect(new Set(ids(taken.round))).toEqual(new Set(ids(backlog)));
  });

  it("starts two backlog deliveries at most while reads wait, live ones and test events all", () => {
    const slots = new DeliverySlots(LIMITS);
    const backlog = [claimed("a", 3_600_000), claimed("a", 3_600_000), claimed("b", 60_000), claimed("c", 31_000)];
    const live = [claimed("d", 5), claimed("d", 29_000), claimed("e", null)];
    slots.enqueue([...backlog, ...live]);
    const readsFirst = new ReadsFirst(() => true);
    const taken = round(slots, readsFirst);
    expect(ids(taken.round).filter((id) => ids(backlog).includes(id))).toHaveLength(2);
    expect(ids(taken.round)).toEqual(expect.arrayContaining(ids(live)));
    // The two on the wire still hold the backlog's room: nothing more starts until one is answered.
    const answered = taken.round.map((item) => readsFirst.started(item, NOW));
    expect(round(slots, readsFirst).round).toEqual([]);
    answered[0]!();
    expect(round(slots, readsFirst).round).toHaveLength(1);
    expect(slots.held).toBe(backlog.length + live.length);
  });

  it("starts an endpoint's live deliveries past its held backlog, and the backlog in its order once no read waits", () => {
    const slots = new DeliverySlots(LIMITS);
    const queued = [claimed("a", 60_000), claimed("a", 60_000), claimed("a", 60_000), claimed("a", 1)];
    slots.enqueue(queued);
    let readsWaiting = true;
    const readsFirst = new ReadsFirst(() => readsWaiting);
    const first = round(slots, readsFirst);
    for (const item of first.round) readsFirst.started(item, NOW);
    expect(ids(first.round)).toEqual(ids([queued[0]!, queued[1]!, queued[3]!]));
    readsWaiting = false;
    expect(ids(round(slots, readsFirst).round)).toEqual(ids([queued[2]!]));
  });
});
