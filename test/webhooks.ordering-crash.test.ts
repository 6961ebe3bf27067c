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
 * Ordered delivery survives a killed process: events of a few references are written and delivered to
 * an endpoint with ordering "reference" while the server is killed with SIGKILL between two deliveries of the same
 * references, then started again on the same database. Every event reaches the receiver, and for each reference
 * the receiver sees the log's order (a delivery whose outcome died with the process is sent again before the next
 * one of its reference: its lease must expire first, and the later deliveries wait for it).
 */

const ENV = {
  WEBHOOK_RETRY_SCHEDULE: "0s,100ms,200ms,300ms,500ms,500ms,500ms,500ms,500ms,500ms",
  WEBHOOK_TIMEOUT: "1s",
  WEBHOOK_LEASE: "2s",
  WEBHOOK_POLL_INTERVAL: "100ms",
};

describe.each(DATABASE_KINDS)("ordered webhooks survive a killed process on %s", (kind) => {
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
      apiKey = (await services.organizations.createOrganization("ordered-crash")).apiKey.key;
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

  it("sends nothing out of its reference's order and loses nothing", async () => {
    const path = "/ordered-crash";
    // Answers take 20-50 ms, so that a delivery is in flight when the process dies.
    receiver.respond(path, () => ({ delayMs: 20 + Math.floor(Math.random() * 30) }));
    const first = await start();
    const caller = { url: first.url, apiKey };
    const endpoint = await createEndpoint(caller, { url: receiver.url(path), ordering: "reference" });
    receiver.verifyWith(path, endpoint.secret);
    const references = await Promise.all(Array.from({ length: 6 }, () => createReference(caller)));

    // One writer per reference records extraction outcomes until the process dies.
    let writing = true;
    const writer = async (referenceId: string) => {
      for (let index = 0; writing; index++) {
        try {
          const body =
            index % 2 === 0 ? { status: "succeeded" } : { status: "failed", error: { code: "X", message: "x" } };
          await http(caller, "POST", `/v1/references/${referenceId}/extractions`, { body });
        } catch {
          return; // the server is gone
        }
      }
    };
    const writers = references.map((reference) => writer(reference.id));
    await receiver.waitForCount(path, 40, 20_000);
    first.child.kill("SIGKILL");
    await first.exited();
    writing = false;
    await Promise.allSettled(writers);

    const second = await start();
    for (const reference of references.slice(0, 2))
      await http({ url: second.url, apiKey }, "POST", `/v1/references/${reference.id}/extractions`, {
        body: { status: "succeeded" },
      });

    const opened = await openDatabase(database.url);
    let events: { id: string; referenceId: string }[];
    try {
      events = await opened.prisma.lifecycleEvent.findMany({
        select: { id: true, referenceId: true },
        orderBy: [{ occurredAt: "asc" }, { id: "asc" }],
      });
    } finally {
      await opened.close();
    }
    await eventually(
      async () => {
        const received = new Set(receiver.on(path).map((hook) => hook.json?.id));
        return events.every((event) => received.has(event.id));
      },
      30_000,
      "every event in the database to reach the receiver",
    );

    const hooks = receiver.on(path);
    for (const reference of references) {
      const log = events.filter((event) => event.referenceId === reference.id).map((event) => event.id);
      const positions = hooks
        .filter((hook) => hook.json.reference_id === reference.id)
        .map((hook) => log.indexOf(hook.json.id as string));
      expect({ reference: reference.id, positions }).toEqual({
        reference: reference.id,
        positions: [...positions].sort((a, b) => a - b),
      });
      expect(new Set(positions).size).toBe(log.length);
    }
    // Every request the receiver got is in the attempt log, the ones whose outcome died with the process included
    // (opened before the send, closed as "outcome unknown" when the delivery was claimed again).
    const requests = new Map<string, number>();
    for (const hook of hooks) requests.set(hook.webhookId, (requests.get(hook.webhookId) ?? 0) + 1);
    const logged = await openDatabase(database.url);
    try {
      const attempts = await logged.prisma.webhookAttempt.groupBy({ by: ["deliveryId"], _count: { _all: true } });
      const attemptsOf = new Map(attempts.map((row) => [row.deliveryId, row._count._all]));
      for (const [webhookId, count] of requests)
        expect({ webhookId, attempts: Math.max(count, attemptsOf.get(webhookId) ?? 0) }).toEqual({
          webhookId,
          attempts: attemptsOf.get(webhookId) ?? 0,
        });
    } finally {
      await logged.close();
    }

    second.child.kill("SIGTERM");
    expect(await second.exited()).toBe(0);
  }, 120_000);
});
