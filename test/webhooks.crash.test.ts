import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { buildServices } from "../src/build-services.ts";
import { loadConfig } from "../src/config.ts";
import { openDatabase } from "../src/store/database.ts";
import { http } from "./support/http.ts";
import { startServerProcess, type ServerProcess } from "./support/server-process.ts";
import {
  createTestDatabase,
  DATABASE_KINDS,
  TEST_WEBHOOK_SECRET_KEY,
  type TestDatabase,
} from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually } from "./support/webhooks.ts";

/*
 * Nothing is lost when the process dies: while events are being written and delivered, the server
 * process is killed with SIGKILL, then started again on the same database. Every event in the database must
 * reach the receiver at least once, and every webhook-id must always carry the same body. The short lease
 * (2 s) lets the restarted process take over the dead one's claims quickly.
 */

const ENV = {
  WEBHOOK_RETRY_SCHEDULE: "0s,100ms,200ms,300ms,500ms,500ms,500ms,500ms,500ms,500ms",
  WEBHOOK_TIMEOUT: "1s",
  WEBHOOK_LEASE: "2s",
  WEBHOOK_POLL_INTERVAL: "100ms",
  // Four requests at a time to the one endpoint: a backlog builds up, so the process dies with deliveries
  // waiting, claimed and in flight.
  WEBHOOK_CONCURRENCY_PER_ENDPOINT: "4",
};

describe.each(DATABASE_KINDS)("webhooks survive a killed process on %s", (kind) => {
  let database: TestDatabase;
  let receiver: WebhookReceiver;
  let apiKey: string;
  const running: ServerProcess[] = [];

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    database = await createTestDatabase(kind);
    const opened = await openDatabase(database.url);
    try {
      const services = buildServices(
        loadConfig({ NODE_ENV: "test", DATABASE_URL: database.url, WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY }),
        opened,
      );
      apiKey = (await services.organizations.createOrganization("crash")).apiKey.key;
    } finally {
      await opened.close();
    }
  });
  afterAll(async () => {
    for (const server of running) if (server.child.exitCode === null) server.child.kill("SIGKILL");
    await receiver?.close();
    await database?.drop();
  });

  async function start(): Promise<ServerProcess> {
    const server = await startServerProcess({ ...ENV, DATABASE_URL: database.url });
    running.push(server);
    return server;
  }

  it("delivers every event at least once, each webhook-id always with the same body", async () => {
    // Answers take 10-40 ms, so that requests are in flight when the process dies.
    receiver.respond("/crash", () => ({ delayMs: 10 + Math.floor(Math.random() * 30) }));
    const first = await start();
    const caller = { url: first.url, apiKey };
    const endpoint = await createEndpoint(caller, { url: receiver.url("/crash") });
    receiver.verifyWith("/crash", endpoint.secret);

    // Four writers create references (one event each) and record extractions until the process dies.
    let writing = true;
    const writer = async () => {
      while (writing) {
        try {
          const reference = await createReference(caller);
          await http(caller, "POST", `/v1/references/${reference.id}/extractions`, { body: { status: "succeeded" } });
        } catch {
          return; // the server is gone: events it may or may not have committed are judged from the database
        }
      }
    };
    const writers = Array.from({ length: 4 }, writer);
    await receiver.waitForCount("/crash", 60, 20_000);
    first.child.kill("SIGKILL");
    await first.exited();
    writing = false;
    await Promise.allSettled(writers);

    const second = await start();
    for (let index = 0; index < 10; index++) await createReference({ url: second.url, apiKey });

    const opened = await openDatabase(database.url);
    let eventIds: string[];
    try {
      eventIds = (await opened.prisma.lifecycleEvent.findMany({ select: { id: true } })).map((event) => event.id);
    } finally {
      await opened.close();
    }
    expect(eventIds.length).toBeGreaterThanOrEqual(70);
    await eventually(
      async () => {
        const received = new Set(receiver.on("/crash").map((hook) => hook.json?.id));
        return eventIds.every((id) => received.has(id));
      },
      30_000,
      "every event in the database to reach the receiver",
    );

    const bodiesById = new Map<string, Set<string>>();
    const webhookIdsByEvent = new Map<string, Set<string>>();
    for (const hook of receiver.on("/crash")) {
      expect(hook.verifiedBy).toEqual([endpoint.secret]);
      bodiesById.set(hook.webhookId, (bodiesById.get(hook.webhookId) ?? new Set()).add(hook.body));
      webhookIdsByEvent.set(hook.json.id, (webhookIdsByEvent.get(hook.json.id) ?? new Set()).add(hook.webhookId));
    }
    for (const bodies of bodiesById.values()) expect(bodies.size).toBe(1);
    // One endpoint: each event has exactly one delivery, whatever the number of times it was sent.
    for (const ids of webhookIdsByEvent.values()) expect(ids.size).toBe(1);

    second.child.kill("SIGTERM");
    expect(await second.exited()).toBe(0);
  }, 120_000);
});
