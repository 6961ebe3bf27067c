import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { buildServices } from "../src/build-services.ts";
import { loadConfig } from "../src/config.ts";
import type { Services } from "../src/domain/services.ts";
import { openDatabase, type Database } from "../src/store/database.ts";
import { Prisma } from "../src/store/sql/sql-template.ts";
import { SqlWebhookClaimRepository } from "../src/store/sql/webhook-claim-repository.ts";
import {
  createTestDatabase,
  DATABASE_KINDS,
  startTestServer,
  TEST_WEBHOOK_SECRET_KEY,
  type TestDatabase,
  type TestServer,
} from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { containerNumber } from "./support/container-numbers.ts";
import { eventually } from "./support/webhooks.ts";

/*
 * The claim shares the worker between organizations, then endpoints, round-robin, and reads only the deliveries
 * it may send (docs/decisions.md, "Webhook claims: heads only, fair shares"): a small organization's webhook does
 * not wait behind a big one's backlog, and deliveries held behind a failing ordered reference are never read.
 */

/** Queues `parents` × 101 events of one organization (a bill of lading reporting 100 containers each). */
async function queueEvents(services: Services, organizationId: string, label: string, parents: number): Promise<void> {
  for (let parent = 0; parent < parents; parent++) {
    const reference = await services.references.createReference(organizationId, {
      billOfLading: `BL-${label}-${parent}`,
      carrierCode: "MAEU",
    });
    await services.references.reportChildren(
      organizationId,
      reference.id,
      Array.from({ length: 100 }, (_, child) => containerNumber("BIGU", parent * 100 + child)),
    );
  }
}

describe.each(DATABASE_KINDS)("fair claims on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, {
      env: {
        WEBHOOK_POLL_INTERVAL: "50ms",
        // The worker's slots, not an endpoint's share of them, bound what it claims: no endpoint is ever full, so
        // a claim in due order would always find the big organization's backlog first.
        WEBHOOK_CONCURRENCY: "8",
        WEBHOOK_CONCURRENCY_PER_ENDPOINT: "8",
        // Queued for later: the backlogs are made due all at once below; a failing delivery is tried every second.
        WEBHOOK_RETRY_SCHEDULE: "1h,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s",
      },
    });
  });
  afterAll(async () => {
    await receiver?.close();
    await server?.close();
  });

  it("sends another organization's webhook long before a big organization's due backlog has drained", async () => {
    const { services } = server.app;
    const big = await server.newOrganization("big");
    const bigPaths = ["/big/0", "/big/1", "/big/2"];
    for (const path of bigPaths)
      await services.webhooks.createEndpoint(big.organizationId, { url: receiver.url(path) });
    const small = await server.newOrganization("small");
    await services.webhooks.createEndpoint(small.organizationId, { url: receiver.url("/small") });
    // 10 × 101 events × 3 endpoints: 3,030 deliveries, all due before the small organization's one.
    await queueEvents(services, big.organizationId, `BIG-${kind}`, 10);
    const backlog = 10 * 101 * bigPaths.length;
    await services.references.createReference(small.organizationId, { billOfLading: "BL-SMALL", carrierCode: "MAEU" });
    // Both made due in one statement, each delivery at its creation: the small organization's comes last in due
    // order, and no time passes between the two (on a slow machine the worker drained the backlog meanwhile).
    await server.database.sql.run(Prisma.sql`
      UPDATE "webhook_deliveries" SET "next_attempt_at" = "created_at"
      WHERE "organization_id" IN (${big.organizationId}, ${small.organizationId})`);

    await receiver.waitForCount("/small", 1, 30_000);
    const bigBeforeSmall = bigPaths.reduce((sum, path) => sum + receiver.on(path).length, 0);
    // In due order the small organization's webhook would have come after the whole backlog.
    expect(bigBeforeSmall).toBeLessThan(backlog / 3);
    // ...and the backlog still drains, every delivery once.
    for (const path of bigPaths) await receiver.waitForCount(path, backlog / bigPaths.length, 120_000);
    const ids = bigPaths.flatMap((path) => receiver.on(path).map((request) => request.webhookId));
    expect(new Set(ids).size).toBe(backlog);
  }, 240_000);

  it("sends other organizations' webhooks beside a failing ordered reference, and its held deliveries in order", async () => {
    const { services } = server.app;
    const ordered = await server.newOrganization("ordered");
    let failing = true;
    receiver.respond("/ordered", () => ({ status: failing ? 500 : 200 }));
    await services.webhooks.createEndpoint(ordered.organizationId, {
      url: receiver.url("/ordered"),
      ordering: "reference",
    });
    const other = await server.newOrganization("other");
    await services.webhooks.createEndpoint(other.organizationId, { url: receiver.url("/other") });
    const reference = await services.references.createReference(ordered.organizationId, {
      billOfLading: `BL-ORDERED-${kind}`,
      carrierCode: "MAEU",
    });
    // 1 + 200 events of one reference: the first fails (and is retried), the 200 behind it are held.
    for (let index = 0; index < 100; index++) {
      await services.referenceTracking.deactivate(ordered.organizationId, reference.id, "data_not_found");
      await services.referenceTracking.reactivate(ordered.organizationId, reference.id);
    }
    await server.database.sql.run(Prisma.sql`
      UPDATE "webhook_deliveries" SET "next_attempt_at" = "created_at" WHERE "organization_id" = ${ordered.organizationId}`);
    await receiver.waitForCount("/ordered", 1, 30_000);

    await services.references.createReference(other.organizationId, { billOfLading: "BL-OTHER", carrierCode: "MAEU" });
    await server.database.sql.run(Prisma.sql`
      UPDATE "webhook_deliveries" SET "next_attempt_at" = "created_at" WHERE "organization_id" = ${other.organizationId}`);
    await receiver.waitForCount("/other", 1, 30_000);
    // Nothing behind the failing head went out: the reference's first event is all the ordered endpoint saw.
    expect(new Set(receiver.on("/ordered").map((request) => request.webhookId)).size).toBe(1);

    // Once the head succeeds (it is tried again every second), the held deliveries follow, in the log's order.
    failing = false;
    const distinct = () => [
      ...new Map(receiver.on("/ordered").map((request) => [request.webhookId, request])).values(),
    ];
    await eventually(async () => distinct().length === 201, 60_000, "the 201 deliveries of the ordered reference");
    const logOrder = (event: { occurred_at: string; id: string }) => `${event.occurred_at} ${event.id}`;
    const sent = distinct().map((request) => logOrder(request.json));
    expect(sent).toEqual([...sent].sort());
  }, 120_000);
});

describe("the claim's reads beside a failing ordered reference on postgres", () => {
  let testDatabase: TestDatabase;
  let database: Database;
  let services: Services;

  beforeAll(async () => {
    testDatabase = await createTestDatabase("postgres");
    const config = loadConfig({
      NODE_ENV: "test",
      DATABASE_URL: testDatabase.url,
      WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY,
    });
    database = await openDatabase(testDatabase.url);
    // No worker: the claims below are made by hand.
    services = buildServices(config, database);
  });
  afterAll(async () => {
    await database?.close();
    await testDatabase?.drop();
  });

  /** Rows of `table` one claim reads, counted by PostgreSQL in a transaction that is rolled back. */
  async function rowsReadByOneClaim(table = "webhook_deliveries"): Promise<{ read: number; claimed: number }> {
    let result: { read: number; claimed: number } | undefined;
    await database.sql
      .transaction(async (sql) => {
        // A table this small is cheaper to scan whole than through an index; with the backlogs of production the
        // planner takes the indexes, so this transaction does too.
        await sql.run(Prisma.sql`SET LOCAL enable_seqscan = off`);
        // The counters of this backend, read before and after the claim in one transaction (they may hold counts
        // of earlier transactions not yet reported: the difference is the claim's own).
        const rowsRead = async () => {
          const [row] = await sql.all<{ read: number }>(Prisma.sql`
            SELECT (COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0))::int AS "read"
            FROM pg_stat_xact_user_tables WHERE relname = ${table}`);
          return row?.read ?? 0;
        };
        const before = await rowsRead();
        const claimed = await new SqlWebhookClaimRepository("postgres", sql).claimDueDeliveries({
          owner: "counting",
          now: new Date(),
          leaseExpiresAt: new Date(Date.now() + 60_000),
          limit: 50,
          perEndpointLimit: new Map(),
          defaultPerEndpointLimit: 10,
        });
        result = { read: (await rowsRead()) - before, claimed: claimed.length };
        throw new Error("rolled back");
      })
      .catch((error: unknown) => {
        if (!(error instanceof Error) || error.message !== "rolled back") throw error;
      });
    return result!;
  }

  it("does not grow with the deliveries held behind the reference", async () => {
    const { organization } = await services.organizations.createOrganization("held");
    await services.webhooks.createEndpoint(organization.id, { url: "http://127.0.0.1:9/held", ordering: "reference" });
    const reference = await services.references.createReference(organization.id, {
      billOfLading: "BL-HELD",
      carrierCode: "MAEU",
    });
    // The reference's first delivery is in flight (leased): everything behind it is held.
    expect(await services.webhookDeliveries.claim("sender", 10, new Map(), 10)).toHaveLength(1);
    const other = await services.organizations.createOrganization("other");
    await services.webhooks.createEndpoint(other.organization.id, { url: "http://127.0.0.1:9/other" });
    await services.references.createReference(other.organization.id, { billOfLading: "BL-OTHER", carrierCode: "MAEU" });

    const holdBack = async (pairs: number) => {
      for (let index = 0; index < pairs; index++) {
        await services.referenceTracking.deactivate(organization.id, reference.id, "data_not_found");
        await services.referenceTracking.reactivate(organization.id, reference.id);
      }
    };
    await holdBack(25);
    const fewHeld = await rowsReadByOneClaim();
    await holdBack(500);
    const manyHeld = await rowsReadByOneClaim();
    // Each claim leases the other organization's delivery only...
    expect(fewHeld.claimed).toBe(1);
    expect(manyHeld.claimed).toBe(1);
    // ...and reads as many rows with 1,050 held deliveries as with 50.
    expect(manyHeld.read).toBe(fewHeld.read);
  }, 120_000);

  // Issue 49.5: the claim starts from the endpoints with pending deliveries (a skip scan of its own index), not
  // from the endpoints table.
  it("does not read the endpoints that have nothing pending", async () => {
    const addIdleEndpoints = async (organizations: number) => {
      for (let index = 0; index < organizations; index++) {
        const { organization } = await services.organizations.createOrganization(`idle-${index}`);
        for (let endpoint = 0; endpoint < 50; endpoint++)
          await services.webhooks.createEndpoint(organization.id, { url: `http://127.0.0.1:9/idle/${endpoint}` });
      }
    };
    const before = await rowsReadByOneClaim("webhook_endpoints");
    await addIdleEndpoints(20);
    const after = await rowsReadByOneClaim("webhook_endpoints");
    // The same endpoint rows read (those with deliveries pending) with 1,000 idle endpoints more.
    expect(after.claimed).toBe(before.claimed);
    expect(after.read).toBe(before.read);
  }, 120_000);
});

// The soak of issue 50.8: beside a replay's 6,000 pending deliveries, SQLite (which keeps no statistics here) read
// every pending row through the status index and sorted them at each step of the claim's skip scan: 55 ms a claim,
// one claim per write commit, and the instance starved. Each read of the deliveries must go through the claim's
// own index.
describe("the claim's plan on sqlite", () => {
  let testDatabase: TestDatabase;
  let database: Database;
  let services: Services;
  let claimStatement = "";

  beforeAll(async () => {
    testDatabase = await createTestDatabase("sqlite");
    const config = loadConfig({
      NODE_ENV: "test",
      DATABASE_URL: testDatabase.url,
      WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY,
    });
    database = await openDatabase(testDatabase.url, {
      onQuery: (sql) => {
        if (sql.includes("WITH RECURSIVE pending_endpoints")) claimStatement = sql;
      },
    });
    services = buildServices(config, database);
  });
  afterAll(async () => {
    await database?.close();
    await testDatabase?.drop();
  });

  it("reads the deliveries through the due-heads index only", async () => {
    const { organization } = await services.organizations.createOrganization("plan");
    for (const path of ["a", "b"])
      await services.webhooks.createEndpoint(organization.id, { url: `http://127.0.0.1:9/${path}` });
    await queueEvents(services, organization.id, "PLAN", 2);
    expect(await services.webhookDeliveries.claim("planner", 10, new Map(), 5)).not.toHaveLength(0);
    expect(claimStatement).not.toBe("");
    // The plan does not depend on the values bound (no statistics): each placeholder is bound to NULL.
    const parts = claimStatement.split("?");
    const plan = await database.sql.all<{ detail: string }>(
      new Prisma.Sql(
        ["EXPLAIN QUERY PLAN " + parts[0]!, ...parts.slice(1)],
        parts.slice(1).map(() => null),
      ),
    );
    const deliveryReads = plan.map((row) => row.detail).filter((detail) => /^(SCAN|SEARCH) x\b/.test(detail));
    expect(deliveryReads.length).toBeGreaterThanOrEqual(3);
    for (const detail of deliveryReads) expect(detail).toContain("webhook_deliveries_due_heads_idx");
  }, 60_000);
});
