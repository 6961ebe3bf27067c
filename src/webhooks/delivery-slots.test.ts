import { describe, expect, it } from "@jest/globals";
import type { ClaimedDelivery } from "../domain/webhooks/delivery-attempts.ts";
import { DeliverySlots } from "./delivery-slots.ts";

/* The worker's slots shared per organization, then per endpoint (issue 49.1). */

let serial = 0;

function claimed(organizationId: string, endpointId: string): ClaimedDelivery {
  serial += 1;
  return {
    delivery: { id: `delivery-${serial}`, organizationId, endpointId },
    endpoint: null,
    attemptId: `attempt-${serial}`,
    leaseToken: "token",
    slotAt: null,
  } as unknown as ClaimedDelivery;
}

const startAll = { holds: () => false, startable: () => true };
const many = (organizationId: string, endpointId: string, count: number) =>
  Array.from({ length: count }, () => claimed(organizationId, endpointId));

describe("delivery slots", () => {
  it("give one organization at most its share, and the others the rest", () => {
    const slots = new DeliverySlots({ concurrency: 50, concurrencyPerOrganization: 25, concurrencyPerEndpoint: 10 });
    // Six endpoints of one organization with more waiting than all the slots.
    for (let endpoint = 0; endpoint < 6; endpoint++) slots.enqueue(many("a", `a-${endpoint}`, 40));
    const first = slots.takeRound(startAll);
    expect(first.round).toHaveLength(25);
    // Its requests never end: another organization's deliveries, claimed after, still find slots.
    slots.enqueue([...many("b", "b-0", 3), ...many("c", "c-0", 1)]);
    const second = slots.takeRound(startAll);
    expect(second.round.map((item) => item.delivery.organizationId).sort()).toEqual(["b", "b", "b", "c"]);
    // An organization's endpoints share its share round-robin, each within its own limit.
    const perEndpoint = new Map<string, number>();
    for (const item of first.round)
      perEndpoint.set(item.delivery.endpointId, (perEndpoint.get(item.delivery.endpointId) ?? 0) + 1);
    expect(Math.max(...perEndpoint.values()) - Math.min(...perEndpoint.values())).toBeLessThanOrEqual(1);
  });

  it("stop claiming for an organization whose claimed deliveries reach its limit", () => {
    const slots = new DeliverySlots({ concurrency: 50, concurrencyPerOrganization: 25, concurrencyPerEndpoint: 10 });
    for (let endpoint = 0; endpoint < 3; endpoint++) slots.enqueue(many("a", `a-${endpoint}`, 40));
    slots.enqueue(many("b", "b-0", 2));
    const { limits } = slots.claimRoom(40, 100, 20);
    expect([0, 1, 2].map((endpoint) => limits.get(`a-${endpoint}`))).toEqual([-20, -20, -20]);
    expect(limits.get("b-0")).toBe(38);
  });

  it("forget an endpoint once nothing of it waits or is on the wire", () => {
    const slots = new DeliverySlots({ concurrency: 50, concurrencyPerOrganization: 25, concurrencyPerEndpoint: 10 });
    slots.enqueue(many("a", "a-0", 2));
    const { round } = slots.takeRound(startAll);
    for (const item of round) slots.giveSlotBack(item);
    expect(slots.held).toBe(0);
    expect(slots.claimRoom(40, 100, 20).limits.size).toBe(0);
  });
});
