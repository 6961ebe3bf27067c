import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gqlData } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually, listDeliveries, type Caller } from "./support/webhooks.ts";

/*
 * A replay follows the endpoint as it is now: narrowed filters apply to what it schedules next and to what it
 * scheduled and has not begun (dropped unsent);
 * disabling pauses it (nothing more is scheduled, the read says paused), enabling resumes it to the end, deleting
 * ends it. The server's batch is 5 events and one request at a time goes to an endpoint: a receiver that holds its
 * third answer holds the replay after its first batch (the next waits until at most half of it is pending).
 */

const ENV = {
  WEBHOOK_RETRY_SCHEDULE: "0s,50ms,50ms",
  WEBHOOK_TIMEOUT: "2s",
  WEBHOOK_LEASE: "5s",
  WEBHOOK_POLL_INTERVAL: "50ms",
  WEBHOOK_DISABLE_AFTER: "1h",
  WEBHOOK_REPLAY_BATCH_SIZE: "5",
  WEBHOOK_CONCURRENCY_PER_ENDPOINT: "1",
};

interface LoggedEvent {
  id: string;
  type: string;
  occurred_at: string;
}

/** A reference with 20 extraction outcomes, alternately succeeded and failed: 21 events, in log order. */
async function referenceWithOutcomes(caller: Caller): Promise<LoggedEvent[]> {
  const reference = await createReference(caller);
  for (let index = 0; index < 20; index++) {
    const status = index % 2 === 0 ? "succeeded" : "failed";
    const body = status === "failed" ? { status, error: { code: "TIMEOUT", message: "carrier timeout" } } : { status };
    expectStatus(await http(caller, "POST", `/v1/references/${reference.id}/extractions`, { body }), 201);
  }
  const events: LoggedEvent[] = (await http(caller, "GET", `/v1/references/${reference.id}/events?limit=100`)).body
    .data;
  expect(events).toHaveLength(21);
  return events.sort((a, b) => a.occurred_at.localeCompare(b.occurred_at) || a.id.localeCompare(b.id));
}

/** Holds the receiver's answers from the third request on, until the returned function lets them go. */
function holdFromThird(receiver: WebhookReceiver, path: string, after = 2): () => void {
  let letGo: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (letGo = resolve));
  receiver.respond(path, ({ count }) => (count > after ? { until: gate } : {}));
  return letGo;
}

describe.each(DATABASE_KINDS)("a replay follows its endpoint on %s", (kind) => {
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

  const replayOf = async (endpointId: string) => {
    const read = await http(server, "GET", `/v1/webhooks/${endpointId}/replay`);
    expectStatus(read, 200);
    return read.body.replay;
  };
  const settled = (endpointId: string) =>
    eventually(
      async () => {
        const deliveries = await listDeliveries(server, endpointId, "?limit=100");
        return deliveries.every((delivery) => delivery.status !== "pending") && deliveries;
      },
      30_000,
      "no delivery pending",
    );

  it("applies event_types narrowed mid-replay to what it schedules next and to what has not begun", async () => {
    const path = `/${kind}/narrowed`;
    const since = new Date().toISOString();
    const events = await referenceWithOutcomes(server);
    const endpoint = await createEndpoint(server, { url: receiver.url(path) });
    const letGo = holdFromThird(receiver, path);
    const replayed = await http(server, "POST", `/v1/webhooks/${endpoint.id}/replay`, { body: { since } });
    expect(replayed.body).toEqual({ count: 21 });
    await receiver.waitForCount(path, 3, 20_000);
    expect(await replayOf(endpoint.id)).toMatchObject({ state: "running", remaining: 16 });

    const narrowed = await http(server, "PATCH", `/v1/webhooks/${endpoint.id}`, {
      body: { event_types: ["extraction_succeeded"] },
    });
    expectStatus(narrowed, 200);
    letGo();
    await eventually(async () => (await replayOf(endpoint.id)) === null, 30_000, "the replay to end");
    await settled(endpoint.id);

    // The three requests begun before the change went out; after it, only the types the endpoint takes now, the
    // first batch's scheduled deliveries included (issue 50.3): the others were dropped, saying why.
    const expected = [
      ...events.slice(0, 3),
      ...events.slice(3).filter((event) => event.type === "extraction_succeeded"),
    ].map((event) => event.id);
    expect(new Set(receiver.on(path).map((hook) => hook.json.id))).toEqual(new Set(expected));
    const dropped = (await settled(endpoint.id)).filter((delivery) => delivery.dropped_reason !== null);
    expect(dropped.map((delivery) => delivery.event_id)).toEqual([events[4]!.id]);
    expect(dropped[0]).toMatchObject({ status: "failed", attempt_count: 0, dropped_reason: "filter_excluded" });
  }, 90_000);

  it("pauses while its endpoint is disabled, resumes when it is enabled, and ends with its deletion", async () => {
    const path = `/${kind}/paused`;
    const since = new Date().toISOString();
    const events = await referenceWithOutcomes(server);
    const endpoint = await createEndpoint(server, { url: receiver.url(path) });
    const letGo = holdFromThird(receiver, path);
    expectStatus(await http(server, "POST", `/v1/webhooks/${endpoint.id}/replay`, { body: { since } }), 202);
    await receiver.waitForCount(path, 3, 20_000);

    expectStatus(await http(server, "PATCH", `/v1/webhooks/${endpoint.id}`, { body: { enabled: false } }), 200);
    letGo();
    // Paused: the replay is put back to the batch the disabling failed, and schedules nothing more.
    await eventually(
      async () => (await replayOf(endpoint.id))?.remaining === 21,
      20_000,
      "the replay to pause where its pending batch began",
    );
    expect(await replayOf(endpoint.id)).toMatchObject({ state: "paused", remaining: 21 });
    const read = await gqlData(server, `query($id: ID!) { webhookEndpoint(id: $id) { replay { state remaining } } }`, {
      id: endpoint.id,
    });
    expect(read.webhookEndpoint.replay).toEqual({ state: "PAUSED", remaining: 21 });
    // Nothing past the first batch was scheduled or sent (what the worker had claimed before the disabling is
    // the worker's to settle).
    expect(await settled(endpoint.id)).toHaveLength(5);
    const firstBatch = new Set(events.slice(0, 5).map((event) => event.id));
    expect(receiver.on(path).every((hook) => firstBatch.has(hook.json.id))).toBe(true);

    expectStatus(await http(server, "PATCH", `/v1/webhooks/${endpoint.id}`, { body: { enabled: true } }), 200);
    await eventually(async () => (await replayOf(endpoint.id)) === null, 30_000, "the resumed replay to end");
    const deliveries = await settled(endpoint.id);
    expect(deliveries.map((delivery) => delivery.status)).toEqual(Array(21).fill("succeeded"));
    expect(new Set(receiver.on(path).map((hook) => hook.json.id))).toEqual(new Set(events.map((event) => event.id)));

    // Deleting the endpoint ends its replay: the row goes with it.
    const sent = receiver.on(path).length;
    const letGoAgain = holdFromThird(receiver, path, sent + 2);
    expectStatus(await http(server, "POST", `/v1/webhooks/${endpoint.id}/replay`, { body: { since } }), 202);
    await receiver.waitForCount(path, sent + 3, 20_000);
    expectStatus(await http(server, "DELETE", `/v1/webhooks/${endpoint.id}`), 204);
    letGoAgain();
    expectStatus(await http(server, "GET", `/v1/webhooks/${endpoint.id}/replay`), 404);
  }, 90_000);
});

describe.each(DATABASE_KINDS)("a replay on an ordered endpoint on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    // Several requests at once per endpoint: only the order of a reference keeps two of its requests apart.
    const { WEBHOOK_CONCURRENCY_PER_ENDPOINT: _, ...env } = ENV;
    server = await startTestServer(kind, { env });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("sends a replayed event of a reference only after the later request of it in flight, then in log order", async () => {
    const path = `/${kind}/ordered`;
    const endpoint = await createEndpoint(server, { url: receiver.url(path), ordering: "reference" });
    const since = new Date().toISOString();
    const reference = await createReference(server);
    const outcome = (status: string) =>
      http(server, "POST", `/v1/references/${reference.id}/extractions`, { body: { status } });
    expectStatus(await outcome("succeeded"), 201);
    expectStatus(await outcome("succeeded"), 201);
    await receiver.waitForCount(path, 3, 20_000);
    const until = new Date().toISOString();
    // The next event's live delivery stays in flight until the test lets it go.
    const letGo = holdFromThird(receiver, path, 3);
    await eventually(async () => new Date().toISOString() > until, 1_000, "the clock past the window");
    expectStatus(await outcome("succeeded"), 201);
    await receiver.waitForCount(path, 4, 20_000);

    const replayed = await http(server, "POST", `/v1/webhooks/${endpoint.id}/replay`, { body: { since, until } });
    expect(replayed.body).toEqual({ count: 3 });
    await eventually(async () => (await replayOf(endpoint.id)) === null, 20_000, "the replay to be scheduled");
    const first = receiver.on(path)[0]!;
    // Either the replayed first event was sent beside the request in flight (two of one reference at once), or
    // it waits, due when that request's lease ends.
    const waiting = await eventually(
      async () => {
        if (receiver.on(path).length > 4) return "sent beside it";
        const deliveries = await listDeliveries(server, endpoint.id, "?limit=100");
        const replayedFirst = deliveries.find((delivery) => delivery.event_id === first.json.id);
        return Date.parse(replayedFirst.next_attempt_at ?? "") > Date.now() + 1_000 && "waits";
      },
      20_000,
      "the replayed first event to be sent or to wait",
    );
    expect(waiting).toBe("waits");
    expect(receiver.on(path)).toHaveLength(4);

    letGo();
    await receiver.waitForCount(path, 7, 20_000);
    const after = receiver.on(path).slice(4);
    expect(after.map((hook) => hook.json.id)).toEqual(
      receiver
        .on(path)
        .slice(0, 3)
        .map((hook) => hook.json.id),
    );
  }, 60_000);

  async function replayOf(endpointId: string) {
    const read = await http(server, "GET", `/v1/webhooks/${endpointId}/replay`);
    expectStatus(read, 200);
    return read.body.replay;
  }
});
