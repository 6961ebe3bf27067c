import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver, type ReceivedWebhook } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually, type Caller } from "./support/webhooks.ts";

/*
 * Ordered delivery per reference. The receiver records every request it gets, failed ones included, so
 * the tests read the order of attempts as the receiver saw them: for each reference, the log positions of the
 * events it received must never go down (a retry repeats a position, a later event never comes before an earlier
 * one has been answered with success or given up).
 */

// Thirty quick retries: a held-back reference retries for a few seconds, long enough for the others to pass it.
const RETRIES = `0s,${Array.from({ length: 30 }, () => "100ms").join(",")}`;
const ENV = {
  WEBHOOK_RETRY_SCHEDULE: RETRIES,
  WEBHOOK_TIMEOUT: "2s",
  WEBHOOK_LEASE: "5s",
  WEBHOOK_POLL_INTERVAL: "50ms",
  WEBHOOK_DISABLE_AFTER: "1h",
};

/** The reference's events, oldest first (the log's order). */
async function logOf(caller: Caller, referenceId: string): Promise<string[]> {
  const page = await http(caller, "GET", `/v1/references/${referenceId}/events?limit=500`);
  expectStatus(page, 200);
  return page.body.data.map((event: { id: string }) => event.id);
}

/** Writes `count` more events on the reference, one request after the other (extraction outcomes). */
async function writeEvents(caller: Caller, referenceId: string, count: number): Promise<void> {
  for (let index = 0; index < count; index++) {
    const body =
      index % 2 === 0
        ? { status: "failed", error: { code: "TIMEOUT", message: `attempt ${index}` } }
        : { status: "succeeded" };
    expectStatus(await http(caller, "POST", `/v1/references/${referenceId}/extractions`, { body }), 201);
  }
}

/** Asserts that the receiver got the reference's events in log order (retries may repeat one) and every one. */
function expectInLogOrder(hooks: readonly ReceivedWebhook[], log: readonly string[], referenceId: string): void {
  const positions = hooks
    .filter((hook) => hook.json.reference_id === referenceId)
    .map((hook) => log.indexOf(hook.json.id as string));
  expect(positions).not.toContain(-1);
  const sorted = [...positions].sort((a, b) => a - b);
  expect({ referenceId, positions }).toEqual({ referenceId, positions: sorted });
  expect(new Set(positions).size).toBe(log.length);
}

describe.each(DATABASE_KINDS)("ordered webhook delivery on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, { env: ENV });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("creates, reads and changes an endpoint's ordering, and refuses an unknown one with a pointer", async () => {
    const created = await createEndpoint(server, { url: receiver.url(`/${kind}/settings`), ordering: "reference" });
    expect(created.ordering).toBe("reference");
    expect((await http(server, "GET", `/v1/webhooks/${created.id}`)).body.ordering).toBe("reference");
    const plain = await createEndpoint(server, { url: receiver.url(`/${kind}/settings`) });
    expect(plain.ordering).toBe("none");
    const changed = await http(server, "PATCH", `/v1/webhooks/${plain.id}`, { body: { ordering: "reference" } });
    expectStatus(changed, 200);
    expect(changed.body.ordering).toBe("reference");
    const refused = await http(server, "PATCH", `/v1/webhooks/${plain.id}`, { body: { ordering: "fifo" } });
    expect(refused.status).toBe(422);
    expect(refused.body.errors[0].pointer).toBe("/ordering");
    for (const id of [created.id, plain.id]) expectStatus(await http(server, "DELETE", `/v1/webhooks/${id}`), 204);
  });

  it("sends each reference's events in log order while a failing delivery holds back only its own reference", async () => {
    const path = `/${kind}/ordered`;
    const endpoint = await createEndpoint(server, { url: receiver.url(path), ordering: "reference" });
    receiver.verifyWith(path, endpoint.secret);

    const references = await Promise.all(Array.from({ length: 4 }, () => createReference(server)));
    const [stuck, ...others] = references;
    // The stuck reference's first extraction event fails until every event of the other references has arrived.
    const othersTotal = () =>
      receiver.on(path).filter((hook) => others.some((reference) => reference.id === hook.json.reference_id));
    const isStuck = (json: any) => json.reference_id === stuck!.id && json.payload?.error?.message === "attempt 0";
    receiver.respond(path, ({ json }) => {
      if (!isStuck(json)) return {};
      const delivered = new Set(othersTotal().map((hook) => hook.json.id));
      return delivered.size < others.length * 7 ? { status: 503 } : {};
    });
    await Promise.all(references.map((reference) => writeEvents(server, reference.id, 6)));
    const logs = new Map<string, string[]>();
    for (const reference of references) logs.set(reference.id, await logOf(server, reference.id));
    const total = [...logs.values()].reduce((sum, log) => sum + log.length, 0);
    await eventually(
      async () => new Set(receiver.on(path).map((hook) => hook.json.id)).size === total,
      30_000,
      "every event of every reference",
    );
    const hooks = receiver.on(path);
    for (const reference of references) expectInLogOrder(hooks, logs.get(reference.id)!, reference.id);
    // The others flowed while the stuck delivery waited: all of them arrived before its last attempt, and none of
    // the stuck reference's later events did.
    const stuckAttempts = hooks.filter((hook) => isStuck(hook.json));
    expect(stuckAttempts.length).toBeGreaterThan(1);
    const lastStuckAttempt = hooks.indexOf(stuckAttempts.at(-1)!);
    expect(othersTotal().every((hook) => hooks.indexOf(hook) < lastStuckAttempt)).toBe(true);
    for (const hook of hooks.slice(0, lastStuckAttempt))
      if (hook.json.reference_id === stuck!.id)
        expect(logs.get(stuck!.id)!.indexOf(hook.json.id as string)).toBeLessThanOrEqual(1);
  }, 60_000);

  it("releases the next delivery of a reference once the one before it is given up", async () => {
    const path = `/${kind}/given-up`;
    const endpoint = await createEndpoint(server, { url: receiver.url(path), ordering: "reference" });
    // Every attempt of the first event (reference_created) fails, until the schedule is exhausted.
    receiver.respond(path, ({ json }) => (json.type === "reference_created" ? { status: 500 } : {}));
    const reference = await createReference(server);
    const firstEventId = (await logOf(server, reference.id))[0];
    await writeEvents(server, reference.id, 2);
    const log = await logOf(server, reference.id);

    await eventually(
      async () => new Set(receiver.on(path).map((hook) => hook.json.id)).size === log.length,
      30_000,
      "the later events after the first was given up",
    );
    const hooks = receiver.on(path);
    expectInLogOrder(hooks, log, reference.id);
    const deliveries = (await http(server, "GET", `/v1/webhooks/${endpoint.id}/deliveries?status=failed`)).body.data;
    expect(deliveries.map((delivery: { event_id: string }) => delivery.event_id)).toEqual([firstEventId]);
    expect(deliveries[0].attempt_count).toBe(31);
  }, 60_000);

  it("shows what is held back, and turning ordering off releases it", async () => {
    const path = `/${kind}/held`;
    const endpoint = await createEndpoint(server, { url: receiver.url(path), ordering: "reference" });
    let failing = true;
    receiver.respond(path, () => (failing ? { status: 503 } : {}));
    const reference = await createReference(server);
    await writeEvents(server, reference.id, 3);
    const log = await logOf(server, reference.id);

    const held = await eventually(
      async () => {
        const summary = await http(server, "GET", `/v1/webhooks/${endpoint.id}/held-back`);
        expectStatus(summary, 200);
        return summary.body.held_back_deliveries === 3 && summary.body;
      },
      10_000,
      "three deliveries held back",
    );
    expect(held).toMatchObject({ ordering: "reference", held_back_references: 1, held_back_deliveries: 3 });
    expect(held.oldest_held_back).toMatchObject({ reference_id: reference.id, event_id: log[1] });
    // Only the first event was tried so far.
    expect(new Set(receiver.on(path).map((hook) => hook.json.id))).toEqual(new Set([log[0]]));

    expectStatus(await http(server, "PATCH", `/v1/webhooks/${endpoint.id}`, { body: { ordering: "none" } }), 200);
    failing = false;
    await eventually(
      async () => new Set(receiver.on(path).map((hook) => hook.json.id)).size === log.length,
      20_000,
      "every event once ordering is off",
    );
    const after = (await http(server, "GET", `/v1/webhooks/${endpoint.id}/held-back`)).body;
    expect(after).toMatchObject({ ordering: "none", held_back_references: 0, oldest_held_back: null });
  }, 60_000);
});

describe("ordered delivery with two instances on one PostgreSQL database", () => {
  let first: TestServer;
  let second: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    first = await startTestServer("postgres", { env: ENV });
    second = await startInstanceOn(first, { env: ENV });
  });
  afterAll(async () => {
    await second?.close();
    await first?.close();
    await receiver?.close();
  });

  it("keeps every reference's log order whichever instance claims, with failures and slow answers", async () => {
    const path = "/instances/ordered";
    const endpoint = await createEndpoint(first, { url: receiver.url(path), ordering: "reference" });
    receiver.verifyWith(path, endpoint.secret);
    // Slow answers keep requests in flight on both instances; one first attempt in five fails.
    receiver.respond(path, ({ count }) => ({
      delayMs: Math.floor(Math.random() * 15),
      ...(count === 1 && Math.random() < 0.2 ? { status: 500 } : {}),
    }));
    const references = await Promise.all(
      Array.from({ length: 12 }, (_, index) => createReference(index % 2 === 0 ? first : second)),
    );
    await Promise.all(
      references.flatMap((reference, index) => [writeEvents(index % 2 === 0 ? second : first, reference.id, 8)]),
    );
    const logs = new Map<string, string[]>();
    for (const reference of references) logs.set(reference.id, await logOf(first, reference.id));
    const total = [...logs.values()].reduce((sum, log) => sum + log.length, 0);
    await eventually(
      async () => new Set(receiver.on(path).map((hook) => hook.json.id)).size === total,
      60_000,
      "every event",
    );
    const hooks = receiver.on(path);
    for (const reference of references) expectInLogOrder(hooks, logs.get(reference.id)!, reference.id);
    for (const hook of hooks) expect(hook.verifiedBy).toEqual([endpoint.secret]);
    const sentBy = async (server: TestServer) => {
      const metrics = (await http(server, "GET", "/metrics", { apiKey: null })).body as string;
      return [...metrics.matchAll(/reftrail_webhook_deliveries_sent_total\{[^}]*\} (\d+)/g)].reduce(
        (sum, match) => sum + Number(match[1]),
        0,
      );
    };
    expect(await sentBy(first)).toBeGreaterThan(0);
    expect(await sentBy(second)).toBeGreaterThan(0);
  }, 120_000);
});
