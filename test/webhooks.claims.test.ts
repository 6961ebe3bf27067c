import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { Prisma } from "../src/store/__generated__/sqlite/client.ts";
import { buildServices } from "../src/build-services.ts";
import { loadConfig } from "../src/config.ts";
import type { Services } from "../src/domain/services.ts";
import { openDatabase, type Database } from "../src/store/database.ts";
import {
  createTestDatabase,
  DATABASE_KINDS,
  startTestServer,
  TEST_WEBHOOK_SECRET_KEY,
  type TestDatabase,
  type TestServer,
} from "./support/test-server.ts";
import { NEVER, WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference } from "./support/webhooks.ts";

/*
 * Batch claims (docs/decisions.md "Webhooks"): two instances claiming in parallel on one PostgreSQL
 * database never lease the same delivery to both, and a hanging endpoint whose backlog is at the head of the
 * queue does not hold back another endpoint's deliveries.
 */

describe("batch claims by two instances on one PostgreSQL database", () => {
  let testDatabase: TestDatabase;
  const databases: Database[] = [];
  const instances: Services[] = [];

  beforeAll(async () => {
    testDatabase = await createTestDatabase("postgres");
    const config = loadConfig({
      NODE_ENV: "test",
      DATABASE_URL: testDatabase.url,
      WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY,
    });
    // Two instances: each its own connection pool, as two processes would have.
    for (let index = 0; index < 2; index++) {
      const database = await openDatabase(testDatabase.url);
      databases.push(database);
      instances.push(buildServices(config, database));
    }
  });
  afterAll(async () => {
    for (const database of databases) await database.close();
    await testDatabase?.drop();
  });

  it("leases each of 600 due deliveries to exactly one of 2 × 8 parallel claimers", async () => {
    const [first, second] = instances as [Services, Services];
    const { organization } = await first.organizations.createOrganization("claims");
    // Three endpoints (the worker is not running here: nothing is sent), 200 events: 600 deliveries.
    for (let index = 0; index < 3; index++)
      await first.webhooks.createEndpoint(organization.id, { url: `http://127.0.0.1:9/claims/${index}` });
    for (let index = 0; index < 200; index++)
      await first.references.createReference(organization.id, {
        billOfLading: `BL-CLAIM-${index}`,
        carrierCode: "MAEU",
      });
    expect(await first.webhookDeliveries.countPending()).toBe(600);

    const claimedBy = new Map<string, string[]>();
    const claimer = async (services: Services, owner: string) => {
      for (;;) {
        const claimed = await services.webhookDeliveries.claim(owner, 25, new Map(), 25);
        if (claimed.length === 0) return;
        for (const { delivery, leaseToken } of claimed) {
          // Each claim leases under a token of its own, named after the claiming instance.
          expect(delivery.leaseOwner).toBe(leaseToken);
          expect(leaseToken.startsWith(`${owner}:`)).toBe(true);
          claimedBy.set(delivery.id, [...(claimedBy.get(delivery.id) ?? []), owner]);
        }
      }
    };
    await Promise.all(
      Array.from({ length: 16 }, (_, index) =>
        claimer(index % 2 === 0 ? first : second, `instance-${index % 2}:claimer-${index}`),
      ),
    );
    expect(claimedBy.size).toBe(600);
    const twice = [...claimedBy].filter(([, owners]) => owners.length > 1);
    expect(twice).toEqual([]);
    const owners = new Set([...claimedBy.values()].map(([owner]) => owner!.split(":")[0]));
    expect(owners).toEqual(new Set(["instance-0", "instance-1"]));
  }, 60_000);
});

describe.each(DATABASE_KINDS)("a hanging endpoint on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, {
      env: {
        WEBHOOK_CONCURRENCY: "4",
        WEBHOOK_CONCURRENCY_PER_ENDPOINT: "2",
        // Longer than the test runs, however busy the machine: the hanging requests must not time out.
        WEBHOOK_TIMEOUT: "60s",
        WEBHOOK_LEASE: "70s",
        WEBHOOK_POLL_INTERVAL: "100ms",
      },
    });
  });
  afterAll(async () => {
    await receiver?.close();
    await server?.close();
  });

  it("does not hold back another endpoint, even with its backlog at the head of the queue", async () => {
    const { apiKey } = await server.newOrganization("hanging");
    const caller = { url: server.url, apiKey };
    receiver.respond("/hanging", () => ({ until: NEVER }));
    await createEndpoint(caller, { url: receiver.url("/hanging") });
    // 30 deliveries to the hanging endpoint, all due before any of the other endpoint's.
    for (let index = 0; index < 30; index++) await createReference(caller);
    await receiver.waitForCount("/hanging", 2);
    await createEndpoint(caller, { url: receiver.url("/healthy") });
    for (let index = 0; index < 10; index++) await createReference(caller);

    // Every healthy delivery arrives while the first hanging requests are still unanswered...
    await receiver.waitForCount("/healthy", 10, 40_000);
    // ...and the hanging endpoint never had more than its two slots.
    expect(receiver.on("/hanging")).toHaveLength(2);
  }, 60_000);
});

describe("outcomes waiting for the database on postgres", () => {
  let server: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer("postgres", {
      env: {
        WEBHOOK_CONCURRENCY: "2",
        WEBHOOK_CONCURRENCY_PER_ENDPOINT: "2",
        WEBHOOK_POLL_INTERVAL: "100ms",
        // Queued for later: the backlog is made due all at once below.
        WEBHOOK_RETRY_SCHEDULE: "1h,1s",
      },
    });
  });
  afterAll(async () => {
    await receiver?.close();
    await server?.close();
  });

  it("wait in at most two transactions, and nothing is sent that the attempt log could not show", async () => {
    const { apiKey } = await server.newOrganization("recording");
    const caller = { url: server.url, apiKey };
    // Three endpoints, so that the per-endpoint limit (2 × 2 claimed) is not what bounds the claims.
    const paths = ["/recording/0", "/recording/1", "/recording/2"];
    for (const path of paths) {
      // Answers take a moment, so that the worker claims again while requests are on the wire.
      receiver.respond(path, () => ({ delayMs: 100 }));
      await createEndpoint(caller, { url: receiver.url(path) });
    }
    const sent = () => paths.flatMap((path) => receiver.on(path));
    for (let index = 0; index < 20; index++) await createReference(caller);
    // Attempts cannot be written while another transaction holds this lock: every outcome waits.
    const blocker = new pg.Client({ connectionString: server.config.databaseUrl });
    await blocker.connect();
    try {
      await blocker.query(`BEGIN`);
      await blocker.query(`LOCK TABLE "webhook_attempts" IN SHARE MODE`);
      await server.database.sql.run(Prisma.sql`UPDATE "webhook_deliveries" SET "next_attempt_at" = "created_at"`);
      // Every send is in the attempt log before it goes out (the claim opens its attempt): with the table locked,
      // the claims wait, and nothing is sent that the log could not show. Wait until they are seen waiting.
      const deadline = Date.now() + 20_000;
      let waiting = 0;
      while (waiting === 0) {
        const { rows } = await blocker.query<{ waiting: number }>(
          `SELECT count(*)::int AS "waiting" FROM pg_locks WHERE NOT granted AND relation = 'webhook_attempts'::regclass`,
        );
        waiting = rows[0]!.waiting;
        if (waiting === 0 && Date.now() > deadline) throw new Error("no claim ever waited on the attempt log");
        if (waiting === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // They wait in at most two transactions (each holds a pool connection the API shares), not one more every
      // few milliseconds.
      expect(waiting).toBeLessThanOrEqual(2);
      expect(sent()).toHaveLength(0);
    } finally {
      await blocker.query(`ROLLBACK`);
      await blocker.end();
    }
    for (const path of paths) await receiver.waitForCount(path, 20, 15_000);
    expect(new Set(sent().map((request) => request.webhookId)).size).toBe(60);
  }, 60_000);
});
