import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { buildServices } from "../src/build-services.ts";
import { loadConfig } from "../src/config.ts";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { openDatabase } from "../src/store/database.ts";
import { startServerProcess, type ServerProcess } from "./support/server-process.ts";
import { subscribe, waitForOpenSubscriptions, type TestSubscription } from "./support/subscription-client.ts";
import { createTestDatabase, TEST_WEBHOOK_SECRET_KEY, type TestDatabase } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, eventually } from "./support/webhooks.ts";

/*
 * PostgreSQL ends the server's connections under load (a failover, an operator's pg_terminate_backend, a pooler
 * restart): the process must live through it. A real server process, six writers (reference creations and
 * 10-item bulk requests), a webhook endpoint receiving every event, and a subscription open throughout, while
 * every connection of the server to its database is terminated every 50–200 ms, in three rounds of 12 s; every
 * kind of connection — pooled in a unit of work, pooled idle, the LISTEN connections of the live side and of the
 * operator page — is killed many times a round.
 *
 * After each round: the process is still running and /readyz answers 200 again. At the end: no answer was a 500
 * (503 while the database is away is the documented answer), every acknowledged creation is there, every bulk
 * request is all there or not at all (and all there when acknowledged), and the webhook worker and the
 * subscription, whose connections were killed too, deliver every acknowledged creation's event.
 */

const ROUNDS = 3;
const ROUND_MS = 12_000;
const WRITERS = 6;
const BULK_ITEMS = 10;

const ENV = {
  // Retries that outlast the 36 s of faults, for requests a loaded machine lets time out. The database's faults
  // burn none of them: a failed claim sends nothing, and an answer whose write failed is not counted.
  WEBHOOK_RETRY_SCHEDULE: ["0s,100ms,200ms,300ms,500ms", ...Array.from({ length: 60 }, () => "1s")].join(","),
  WEBHOOK_TIMEOUT: "1s",
  WEBHOOK_LEASE: "2s",
  WEBHOOK_POLL_INTERVAL: "100ms",
};

const CREATED_EVENTS = `subscription {
  lifecycleEvents(types: [REFERENCE_CREATED]) { cursor node { id referenceId } }
}`;

let serial = 0;
function containerNumber(): string {
  const firstTen = `FLTU${String(++serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("the server process while PostgreSQL terminates its connections", () => {
  let database: TestDatabase;
  let databaseName: string;
  let receiver: WebhookReceiver;
  let server: ServerProcess;
  let apiKey: string;
  let exitedWith: { value: number | string | null } | undefined;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    database = await createTestDatabase("postgres");
    databaseName = new URL(database.url).pathname.slice(1);
    const opened = await openDatabase(database.url);
    try {
      const services = buildServices(
        loadConfig({ NODE_ENV: "test", DATABASE_URL: database.url, WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY }),
        opened,
      );
      apiKey = (await services.organizations.createOrganization("faults")).apiKey.key;
    } finally {
      await opened.close();
    }
    server = await startServerProcess({ ...ENV, DATABASE_URL: database.url });
    void server.exited().then((value) => (exitedWith = { value }));
  }, 60_000);

  afterAll(async () => {
    if (server && server.child.exitCode === null && server.child.signalCode === null) {
      server.child.kill("SIGTERM");
      await server.exited();
    }
    await receiver?.close();
    await database?.drop();
  });

  /** A request that never hangs the test: a server that stopped answering fails it after 30 s. */
  async function request(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const response = await fetch(`${server.url}${path}`, {
      method,
      headers: { "x-api-key": apiKey, ...(body !== undefined && { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    return { status: response.status, body: text === "" ? undefined : (JSON.parse(text) as unknown) };
  }

  /** Waits for /readyz to answer 200, under a generous deadline. */
  async function ready(): Promise<void> {
    await eventually(
      async () => (await fetch(`${server.url}/readyz`, { signal: AbortSignal.timeout(10_000) })).status === 200,
      30_000,
      "/readyz to answer 200",
    );
  }

  it("never exits, answers no 500, loses no acknowledged write, half-applies no bulk request", async () => {
    const endpoint = await createEndpoint({ url: server.url, apiKey }, { url: receiver.url("/faults") });
    receiver.verifyWith("/faults", endpoint.secret);
    const subscription: TestSubscription = subscribe({ url: server.url, apiKey }, CREATED_EVENTS);
    await waitForOpenSubscriptions(server, 1);

    // Each writer has ten references of its own for its bulk requests (created before the faults start).
    const writerReferences: string[][] = [];
    for (let writer = 0; writer < WRITERS; writer++) {
      const ids: string[] = [];
      for (let index = 0; index < BULK_ITEMS; index++) {
        const created = await request("POST", "/v1/references", {
          container_id: containerNumber(),
          carrier_code: "MSCU",
        });
        expect(created.status).toBe(201);
        ids.push(created.body.reference.id);
      }
      writerReferences.push(ids);
    }
    const acknowledgedCreations = new Set(writerReferences.flat());
    const acknowledgedBatches = new Set<string>();
    const unexpected: string[] = [];
    const statuses = new Map<number, number>();
    const note = (what: string, status: number, body: unknown) => {
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
      if (status >= 500 && status !== 503) unexpected.push(`${what}: ${status} ${JSON.stringify(body)}`);
    };

    let writing = true;
    const writer = async (index: number) => {
      for (let turn = 0; writing; turn++) {
        try {
          if (turn % 2 === 0) {
            const created = await request("POST", "/v1/references", {
              container_id: containerNumber(),
              carrier_code: "MSCU",
            });
            note("creation", created.status, created.body);
            if (created.status === 201) acknowledgedCreations.add(created.body.reference.id);
          } else {
            const batch = randomUUID();
            const ingested = await request("POST", "/v1/ingestions", {
              items: writerReferences[index]!.map((referenceId, item) => ({
                kind: "update",
                reference_id: referenceId,
                update: { batch, item },
              })),
            });
            note("bulk request", ingested.status, ingested.body);
            if (ingested.status === 201) acknowledgedBatches.add(batch);
          }
        } catch (error) {
          // No answer at all: the process stopped answering (or died).
          unexpected.push(`no answer: ${(error as Error).message}`);
          await sleep(100);
        }
      }
    };
    const writers = Array.from({ length: WRITERS }, (_, index) => writer(index));

    const admin = new pg.Client({
      connectionString: process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres",
    });
    await admin.connect();
    let terminated = 0;
    try {
      for (let round = 0; round < ROUNDS; round++) {
        const roundEnds = Date.now() + ROUND_MS;
        while (Date.now() < roundEnds) {
          // Every connection of the server to its database (the admin connection is to another database).
          const { rowCount } = await admin.query(
            `SELECT pg_terminate_backend("pid") FROM "pg_stat_activity"
             WHERE "datname" = $1 AND "pid" <> pg_backend_pid()`,
            [databaseName],
          );
          terminated += rowCount ?? 0;
          await sleep(50 + Math.floor(Math.random() * 150));
        }
        expect(exitedWith).toBeUndefined();
        await ready();
        expect(exitedWith).toBeUndefined();
      }
    } finally {
      writing = false;
      await Promise.all(writers);
      await admin.end();
    }

    expect(exitedWith).toBeUndefined();
    expect(unexpected).toEqual([]);
    // The faults did reach the server: connections were terminated and some requests were refused with 503.
    expect(terminated).toBeGreaterThan(ROUNDS * 10);
    expect(statuses.get(201) ?? 0).toBeGreaterThan(0);

    // Every acknowledged creation is there; every bulk request is whole or absent, and whole when acknowledged.
    const reader = new pg.Client({ connectionString: database.url });
    await reader.connect();
    try {
      const { rows: references } = await reader.query<{ id: string }>(`SELECT "id" FROM "shipping_references"`);
      const present = new Set(references.map((row) => row.id));
      expect([...acknowledgedCreations].filter((id) => !present.has(id))).toEqual([]);
      const { rows: batches } = await reader.query<{ batch: string; items: string }>(
        `SELECT "document"->>'batch' AS "batch", COUNT(*) AS "items" FROM "reference_updates" GROUP BY 1`,
      );
      const itemsByBatch = new Map(batches.map((row) => [row.batch, Number(row.items)]));
      expect([...itemsByBatch.values()].filter((items) => items !== BULK_ITEMS)).toEqual([]);
      expect([...acknowledgedBatches].filter((batch) => itemsByBatch.get(batch) !== BULK_ITEMS)).toEqual([]);
    } finally {
      await reader.end();
    }

    // The webhook worker and the live side lived through it: every acknowledged creation's event is delivered
    // to the endpoint and sent to the subscription opened before the faults.
    const delivered = () =>
      new Set(
        receiver
          .on("/faults")
          .filter((hook) => hook.json.type === "reference_created")
          .map((hook) => hook.json.reference_id as string),
      );
    // The receiver answers from this process: a check that rebuilt the set once per creation (quadratic, every
    // 20 ms) kept the event loop busy enough to slow its answers to the worker five-fold.
    await eventually(
      async () => {
        const arrived = delivered();
        return [...acknowledgedCreations].every((id) => arrived.has(id));
      },
      60_000,
      "every acknowledged creation's webhook",
    ).catch(async (error: unknown) => {
      const arrived = delivered();
      const missing = [...acknowledgedCreations].filter((id) => !arrived.has(id));
      throw new Error(
        `${(error as Error).message}: ${missing.length} of ${acknowledgedCreations.size} creations missing; ` +
          `their deliveries: ${await describeDeliveries(database.url, missing)}\nserver log (webhooks): ` +
          serverLogAbout(server, /webhook|claim|record/i),
      );
    });
    expect(receiver.on("/faults").every((hook) => hook.verifiedBy.length > 0)).toBe(true);
    const sent = () =>
      new Set(
        subscription.data.map((message: { lifecycleEvents: { node: { referenceId: string } } }) => {
          return message.lifecycleEvents.node.referenceId;
        }),
      );
    const missing = () => {
      const received = sent();
      return [...acknowledgedCreations].filter((id) => !received.has(id));
    };
    await subscription
      .waitFor(() => missing().length === 0, 60_000)
      .catch((error: unknown) => {
        throw new Error(
          `${(error as Error).message}: ${missing().length} of ${acknowledgedCreations.size} creations missing, ` +
            `errors ${JSON.stringify(subscription.errors)}, close ${JSON.stringify(subscription.closeInfo())}`,
        );
      });
    expect(subscription.errors).toEqual([]);

    // And a creation after the faults still reaches both.
    const after = await request("POST", "/v1/references", { container_id: containerNumber(), carrier_code: "MSCU" });
    expect(after.status).toBe(201);
    await eventually(async () => delivered().has(after.body.reference.id), 30_000, "the last creation's webhook");
    await subscription.waitFor(() => sent().has(after.body.reference.id), 30_000);
    await subscription.dispose();
    expect(exitedWith).toBeUndefined();
  }, 300_000);
});

/**
 * For a failure message: each reference's creation event, its delivery rows (status, attempts made, when due,
 * lease) and their attempt rows, read straight from the database.
 */
async function describeDeliveries(url: string, referenceIds: readonly string[]): Promise<string> {
  if (referenceIds.length === 0) return "none";
  const reader = new pg.Client({ connectionString: url });
  await reader.connect();
  try {
    const { rows } = await reader.query(
      `SELECT e."reference_id", e."id" AS "event_id", d."id" AS "delivery_id", d."status", d."attempt_count",
              d."next_attempt_at", d."lease_owner", d."lease_expires_at", d."updated_at",
              (SELECT json_agg(json_build_object('at', a."attempted_at", 'status', a."status_code", 'error', a."error")
                               ORDER BY a."attempted_at")
                 FROM "webhook_attempts" a WHERE a."delivery_id" = d."id") AS "attempts"
       FROM "lifecycle_events" e
       LEFT JOIN "webhook_deliveries" d ON d."event_id" = e."id"
       WHERE e."type" = 'reference_created' AND e."reference_id" = ANY($1)`,
      [referenceIds],
    );
    const found = new Set(rows.map((row: { reference_id: string }) => row.reference_id));
    const withoutEvent = referenceIds.filter((id) => !found.has(id));
    // Lost or late at a glance: how many are in each state (a lease still held, attempts made so far).
    const states = new Map<string, number>();
    for (const row of rows) {
      const state = `${row.status ?? "no delivery row"}, ${row.attempt_count ?? 0} attempts, ${row.lease_owner ? "leased" : "not leased"}`;
      states.set(state, (states.get(state) ?? 0) + 1);
    }
    return (
      `at ${new Date().toISOString()}: ${JSON.stringify(Object.fromEntries(states))}; ` +
      `without a creation event: ${JSON.stringify(withoutEvent)}; the first 20: ${JSON.stringify(rows.slice(0, 20))}`
    );
  } finally {
    await reader.end();
  }
}

/** The server's log lines that match `pattern`, the last 30 of them, each cut to 300 characters. */
function serverLogAbout(server: ServerProcess, pattern: RegExp): string {
  return server
    .output()
    .split("\n")
    .filter((line) => pattern.test(line))
    .slice(-30)
    .map((line) => line.slice(0, 300))
    .join("\n");
}
