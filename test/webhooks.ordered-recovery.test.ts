import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver, type Reply } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually, listDeliveries, type Caller } from "./support/webhooks.ts";

/*
 * Recovery and re-sends on an ordered endpoint (SPEC 9.1): the delivery sent again goes out before the later
 * deliveries of its reference that have not succeeded yet, and holds them back as the head of the order does; a
 * delivery whose later deliveries already succeeded goes out at once. The receiver parks a delivery with
 * `503 Retry-After: 3600` (pending, its retry an hour away) or gives it up with 500 (two attempts here).
 */

const ENV = {
  WEBHOOK_RETRY_SCHEDULE: "0s,50ms",
  WEBHOOK_TIMEOUT: "2s",
  WEBHOOK_LEASE: "5s",
  WEBHOOK_POLL_INTERVAL: "50ms",
  WEBHOOK_DISABLE_AFTER: "1h",
  // One request at a time per endpoint: what the receiver sees is the order the deliveries are sent in.
  WEBHOOK_CONCURRENCY_PER_ENDPOINT: "1",
};

const PARKED: Reply = { status: 503, headers: { "retry-after": "3600" } };
const hourAgo = () => new Date(Date.now() - 3_600_000).toISOString();

/** The reference's events, oldest first (the log's order). */
async function logOf(caller: Caller, referenceId: string): Promise<string[]> {
  const page = await http(caller, "GET", `/v1/references/${referenceId}/events?limit=100`);
  expectStatus(page, 200);
  return page.body.data.map((event: { id: string }) => event.id);
}

async function writeExtractions(caller: Caller, referenceId: string, count: number): Promise<void> {
  for (let index = 0; index < count; index++)
    expectStatus(
      await http(caller, "POST", `/v1/references/${referenceId}/extractions`, { body: { status: "succeeded" } }),
      201,
    );
}

async function heldBackDeliveries(caller: Caller, endpointId: string): Promise<number> {
  const summary = await http(caller, "GET", `/v1/webhooks/${endpointId}/held-back`);
  expectStatus(summary, 200);
  return summary.body.held_back_deliveries;
}

describe.each(DATABASE_KINDS)("recovery and re-sends on an ordered endpoint on %s", (kind) => {
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

  /** The event ids the path received from index `from` on, once `count` of them arrived. */
  const receivedFrom = async (path: string, from: number, count: number) =>
    (await receiver.waitForCount(path, from + count, 20_000)).slice(from).map((hook) => hook.json.id as string);

  it("recovers a failing head before the later deliveries it held back, which follow in log order", async () => {
    const path = `/${kind}/recover-head`;
    let down = true;
    receiver.respond(path, () => (down ? PARKED : {}));
    const endpoint = await createEndpoint(server, { url: receiver.url(path), ordering: "reference" });
    const reference = await createReference(server);
    await writeExtractions(server, reference.id, 3);
    const log = await logOf(server, reference.id);
    expect(log).toHaveLength(4);
    // The first delivery failed once and waits an hour for its retry; the three later ones wait behind it.
    await eventually(
      async () => {
        const dryRun = await http(server, "POST", `/v1/webhooks/${endpoint.id}/recover`, {
          body: { since: hourAgo(), dry_run: true },
        });
        return dryRun.body.count === 1;
      },
      10_000,
      "the first delivery's failed attempt",
    );
    expect(await heldBackDeliveries(server, endpoint.id)).toBe(3);
    expect(receiver.on(path).map((hook) => hook.json.id)).toEqual([log[0]]);

    down = false;
    const sentBefore = receiver.on(path).length;
    const recovered = await http(server, "POST", `/v1/webhooks/${endpoint.id}/recover`, { body: { since: hourAgo() } });
    expectStatus(recovered, 202);
    expect(recovered.body).toEqual({ count: 1 });
    expect(await receivedFrom(path, sentBefore, 4)).toEqual(log);
    await eventually(
      async () => (await listDeliveries(server, endpoint.id, "?status=succeeded")).length === 4,
      10_000,
      "every delivery to succeed",
    );
    expect(await heldBackDeliveries(server, endpoint.id)).toBe(0);
  }, 60_000);

  it("re-sends a given-up delivery before the later ones of its reference that have not succeeded", async () => {
    const path = `/${kind}/resend-given-up`;
    let down = true;
    // The first event is given up; the next one then fails too and waits an hour, holding back the last two.
    receiver.respond(path, ({ json }) => (!down ? {} : json.type === "reference_created" ? { status: 500 } : PARKED));
    const endpoint = await createEndpoint(server, { url: receiver.url(path), ordering: "reference" });
    const reference = await createReference(server);
    await writeExtractions(server, reference.id, 3);
    const log = await logOf(server, reference.id);
    const [givenUp, parked] = await eventually(
      async () => {
        const failed = await listDeliveries(server, endpoint.id, "?status=failed");
        const waiting = (await listDeliveries(server, endpoint.id, "?status=pending")).filter(
          (delivery) => delivery.event_id === log[1] && delivery.attempt_count === 1,
        );
        return failed.length === 1 && waiting.length === 1 && [failed[0], waiting[0]];
      },
      10_000,
      "the first delivery given up and the second one failed once",
    );
    expect(givenUp.event_id).toBe(log[0]);
    expect(await heldBackDeliveries(server, endpoint.id)).toBe(2);

    down = false;
    const sentBefore = receiver.on(path).length;
    for (const delivery of [givenUp, parked])
      expectStatus(await http(server, "POST", `/v1/webhooks/${endpoint.id}/deliveries/${delivery.id}/resend`), 202);
    expect(await receivedFrom(path, sentBefore, 4)).toEqual(log);
  }, 60_000);

  it("re-sends at once a given-up delivery whose later deliveries already succeeded", async () => {
    const path = `/${kind}/resend-after-later`;
    let down = true;
    receiver.respond(path, ({ json }) => (down && json.type === "reference_created" ? { status: 500 } : {}));
    const endpoint = await createEndpoint(server, { url: receiver.url(path), ordering: "reference" });
    const reference = await createReference(server);
    await writeExtractions(server, reference.id, 2);
    const log = await logOf(server, reference.id);
    const givenUp = await eventually(
      async () => {
        const failed = await listDeliveries(server, endpoint.id, "?status=failed");
        const succeeded = await listDeliveries(server, endpoint.id, "?status=succeeded");
        return failed.length === 1 && succeeded.length === 2 && failed[0];
      },
      10_000,
      "the first delivery given up and the later ones delivered",
    );
    expect(givenUp.event_id).toBe(log[0]);

    down = false;
    const sentBefore = receiver.on(path).length;
    const resent = await http(server, "POST", `/v1/webhooks/${endpoint.id}/deliveries/${givenUp.id}/resend`);
    expectStatus(resent, 202);
    expect(await receivedFrom(path, sentBefore, 1)).toEqual([log[0]]);
    await eventually(
      async () => (await listDeliveries(server, endpoint.id, "?status=succeeded")).length === 3,
      10_000,
      "the re-sent delivery to succeed",
    );
    expect(await heldBackDeliveries(server, endpoint.id)).toBe(0);
  }, 60_000);
});

describe("recovery on an ordered endpoint with two instances on one PostgreSQL database", () => {
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

  it("sends each reference's recovered head before its held-back deliveries, whichever instance claims", async () => {
    const path = "/instances/recover-heads";
    let down = true;
    receiver.respond(path, () => (down ? PARKED : {}));
    const endpoint = await createEndpoint(first, { url: receiver.url(path), ordering: "reference" });
    const references = await Promise.all(
      Array.from({ length: 6 }, (_, index) => createReference(index % 2 === 0 ? first : second)),
    );
    await Promise.all(
      references.map((reference, index) => writeExtractions(index % 2 === 0 ? second : first, reference.id, 3)),
    );
    const logs = new Map<string, string[]>();
    for (const reference of references) logs.set(reference.id, await logOf(first, reference.id));
    await eventually(
      async () => {
        const dryRun = await http(first, "POST", `/v1/webhooks/${endpoint.id}/recover`, {
          body: { since: hourAgo(), dry_run: true },
        });
        return dryRun.body.count === references.length;
      },
      10_000,
      "every reference's first delivery failed once",
    );
    expect(await heldBackDeliveries(first, endpoint.id)).toBe(references.length * 3);

    down = false;
    const sentBefore = receiver.on(path).length;
    const recovered = await http(second, "POST", `/v1/webhooks/${endpoint.id}/recover`, { body: { since: hourAgo() } });
    expect(recovered.body).toEqual({ count: references.length });
    const hooks = (await receiver.waitForCount(path, sentBefore + references.length * 4, 30_000)).slice(sentBefore);
    for (const reference of references)
      expect({
        reference: reference.id,
        ids: hooks.filter((hook) => hook.json.reference_id === reference.id).map((hook) => hook.json.id),
      }).toEqual({ reference: reference.id, ids: logs.get(reference.id) });
  }, 90_000);
});
