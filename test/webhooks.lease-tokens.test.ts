import { afterEach, describe, expect, it } from "@jest/globals";
import type { AttemptReport } from "../src/domain/webhooks/delivery-attempts.ts";
import { DATABASE_KINDS, ManualClock, startTestServices, type TestServices } from "./support/test-server.ts";

/*
 * Each claim leases under a token of its own. An instance whose outcome write was held up past its lease (a
 * stalled database, a long pause) may record it after the same instance claimed the delivery again: that late
 * outcome is logged, but it settles nothing; the newer claim's outcome does. With one lease owner per instance,
 * the late outcome settled the delivery under the newer claim, whose own outcome was then dropped.
 */

const LEASE_MS = 30_000;

function answered(statusCode: number, at: Date): AttemptReport {
  return { attemptedAt: at, statusCode, error: null, latencyMs: 5, responseBody: "", retryAfterMs: null };
}

describe.each(DATABASE_KINDS)("lease tokens (%s)", (kind) => {
  let test: TestServices | undefined;
  afterEach(async () => {
    await test?.close();
    test = undefined;
  });

  it("a late outcome of an older claim does not settle the newer claim of the same delivery", async () => {
    const clock = new ManualClock();
    test = await startTestServices(kind, clock);
    const { webhooks, webhookDeliveries: deliveries, organizations } = test.services;
    const { organization } = await organizations.createOrganization("lease-tokens");
    const { endpoint } = await webhooks.createEndpoint(organization.id, { url: "http://127.0.0.1:9/lease-tokens" });
    const queued = await webhooks.sendTestEvent(organization.id, endpoint.id);

    // One instance claims the delivery, its lease expires, and the same instance claims it again.
    const [first] = await deliveries.claim("instance-a", 10, new Map(), 10);
    expect(first?.delivery.id).toBe(queued.id);
    clock.advance(LEASE_MS + 1_000);
    const [second] = await deliveries.claim("instance-a", 10, new Map(), 10);
    expect(second?.delivery.id).toBe(queued.id);
    expect(second!.leaseToken).not.toBe(first!.leaseToken);

    // The first claim's answer arrives late: it is logged, and the delivery stays the second claim's.
    await deliveries.recordAttempts([{ claimed: first!, report: answered(200, first!.delivery.updatedAt) }]);
    const afterLate = await webhooks.getDelivery(organization.id, endpoint.id, queued.id);
    expect(afterLate).toMatchObject({ status: "pending", leaseOwner: second!.leaseToken });

    // The second claim's answer settles it: its lost first attempt and this one are counted.
    await deliveries.recordAttempts([{ claimed: second!, report: answered(500, clock.now()) }]);
    const settled = await webhooks.getDelivery(organization.id, endpoint.id, queued.id);
    expect(settled).toMatchObject({ status: "pending", attemptCount: 2, leaseOwner: null });
    expect(settled.nextAttemptAt!.getTime()).toBeGreaterThan(clock.now().getTime());
    expect(settled.attempts.map((attempt) => attempt.statusCode)).toEqual([200, 500]);
  });
});
