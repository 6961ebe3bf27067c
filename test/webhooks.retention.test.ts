import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { buildServices } from "../src/build-services.ts";
import { loadConfig } from "../src/config.ts";
import type { Services } from "../src/domain/services.ts";
import { newId } from "../src/domain/shared/ids.ts";
import { openDatabase, type Database } from "../src/store/database.ts";
import { createTestDatabase, DATABASE_KINDS, ManualClock, type TestDatabase } from "./support/test-server.ts";

/*
 * Deliveries are kept bounded (docs/decisions.md, "Webhooks"): a delivery that succeeded longer than
 * WEBHOOK_DELIVERY_RETENTION ago is deleted with its attempts, in bounded batches, by the retention job and
 * `reftrail prune`. Pending and failed deliveries stay: they may still be sent or re-sent by hand.
 */

const DAY = 24 * 60 * 60 * 1_000;

describe.each(DATABASE_KINDS)("pruning webhook deliveries on %s", (kind) => {
  let testDatabase: TestDatabase;
  let database: Database;
  let services: Services;
  const clock = new ManualClock(new Date("2026-01-10T00:00:00.000Z"));

  beforeAll(async () => {
    testDatabase = await createTestDatabase(kind);
    database = await openDatabase(testDatabase.url);
    const config = loadConfig({
      NODE_ENV: "test",
      DATABASE_URL: testDatabase.url,
      WEBHOOK_DELIVERY_RETENTION: "30d",
    });
    services = buildServices(config, database, clock);
  });

  afterAll(async () => {
    await database?.close();
    await testDatabase?.drop();
  });

  it("deletes succeeded deliveries past the retention with their attempts, in bounded batches", async () => {
    const { organization } = await services.organizations.createOrganization("retention");
    await services.webhooks.createEndpoint(organization.id, { url: "http://127.0.0.1:9/hooks" });
    const reference = await services.references.createReference(organization.id, {
      bookingNumber: "BK-PRUNE",
      carrierCode: "MAEU",
    });
    for (let i = 0; i < 5; i++) {
      await services.referenceTracking.recordExtraction(organization.id, reference.id, { status: "succeeded" });
    }
    const prisma = database.prisma;
    const deliveries = await prisma.webhookDelivery.findMany({
      where: { organizationId: organization.id },
      orderBy: { id: "asc" },
    });
    expect(deliveries).toHaveLength(6);
    const [oldA, oldB, oldC, failed, pending, recent] = deliveries.map((delivery) => delivery.id) as [
      string,
      string,
      string,
      string,
      string,
      string,
    ];
    const start = clock.now().getTime();
    const mark = (ids: string[], status: string, at: number) =>
      prisma.webhookDelivery.updateMany({
        where: { id: { in: ids } },
        data: { status, nextAttemptAt: null, updatedAt: new Date(at) },
      });
    await mark([oldA, oldB, oldC], "succeeded", start);
    await mark([failed], "failed", start);
    await mark([recent], "succeeded", start + 29 * DAY);
    await prisma.webhookAttempt.createMany({
      data: deliveries.map((delivery) => ({
        id: newId(),
        deliveryId: delivery.id,
        attemptedAt: new Date(start),
        statusCode: 200,
        error: null,
        latencyMs: 3,
        responseBody: "ok",
      })),
    });

    clock.set(new Date(start + 31 * DAY));
    // One bounded batch: two of the three old ones.
    expect(await services.webhookDeliveries.pruneSucceededDeliveries(2, 1)).toBe(2);
    expect(await services.webhookDeliveries.pruneSucceededDeliveries(2)).toBe(1);
    expect(await services.webhookDeliveries.pruneSucceededDeliveries(2)).toBe(0);

    const left = await prisma.webhookDelivery.findMany({ where: { organizationId: organization.id } });
    expect(left.map((delivery) => delivery.id).sort()).toEqual([failed, pending, recent].sort());
    const attempts = await prisma.webhookAttempt.findMany({
      where: { deliveryId: { in: deliveries.map((delivery) => delivery.id) } },
    });
    expect(attempts.map((attempt) => attempt.deliveryId).sort()).toEqual([failed, pending, recent].sort());

    // The recent one goes once it is 30 days old too; failed and pending ones never do.
    clock.set(new Date(start + 58 * DAY));
    expect(await services.webhookDeliveries.pruneSucceededDeliveries()).toBe(0);
    clock.set(new Date(start + 60 * DAY));
    expect(await services.webhookDeliveries.pruneSucceededDeliveries()).toBe(1);
    clock.advance(365 * DAY);
    expect(await services.webhookDeliveries.pruneSucceededDeliveries()).toBe(0);
    const kept = await prisma.webhookDelivery.findMany({ where: { organizationId: organization.id } });
    expect(kept.map((delivery) => delivery.id).sort()).toEqual([failed, pending].sort());
  });
});
