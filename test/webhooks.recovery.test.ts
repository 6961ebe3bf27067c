import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Prisma } from "../src/store/__generated__/sqlite/client.ts";
import { gql } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually, listDeliveries, type Caller } from "./support/webhooks.ts";

/*
 * Recovery and replay over a window, on REST and GraphQL: recover re-sends given-up deliveries under
 * their webhook-id and body; replay sends an endpoint made afterwards every event its filters match today, with
 * the tag snapshot of the event's time, in batches (the server's batch is 5 events here, so windows span several);
 * both refuse windows before retention, inverted windows and more than 100,000 matches. A replay outlives the
 * instance that took it: stopped in the middle, it is resumed where it stopped.
 */

const ENV = {
  WEBHOOK_RETRY_SCHEDULE: "0s,50ms,50ms",
  WEBHOOK_TIMEOUT: "2s",
  WEBHOOK_LEASE: "5s",
  WEBHOOK_POLL_INTERVAL: "50ms",
  WEBHOOK_DISABLE_AFTER: "1h",
  WEBHOOK_REPLAY_BATCH_SIZE: "5",
  // One request at a time per endpoint: what the receiver sees is the order the deliveries are sent in.
  WEBHOOK_CONCURRENCY_PER_ENDPOINT: "1",
};

const hourAgo = () => new Date(Date.now() - 3_600_000).toISOString();

async function writeExtractions(caller: Caller, referenceId: string, count: number): Promise<void> {
  for (let index = 0; index < count; index++)
    expectStatus(
      await http(caller, "POST", `/v1/references/${referenceId}/extractions`, { body: { status: "succeeded" } }),
      201,
    );
}

describe.each(DATABASE_KINDS)("webhook recovery and replay on %s", (kind) => {
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

  it("recovers given-up deliveries under their webhook-id and body, in creation order", async () => {
    const path = `/${kind}/recover`;
    let down = true;
    receiver.respond(path, () => (down ? { status: 503 } : {}));
    const endpoint = await createEndpoint(server, { url: receiver.url(path) });
    receiver.verifyWith(path, endpoint.secret);
    const reference = await createReference(server);
    await writeExtractions(server, reference.id, 3);
    const failed = await eventually(
      async () => {
        const deliveries = await listDeliveries(server, endpoint.id, "?status=failed");
        return deliveries.length === 4 && deliveries;
      },
      20_000,
      "four given-up deliveries",
    );
    const firstBodies = new Map(receiver.on(path).map((hook) => [hook.webhookId, hook.body]));
    down = false;
    const sentBefore = receiver.on(path).length;

    const dryRun = await http(server, "POST", `/v1/webhooks/${endpoint.id}/recover`, {
      body: { since: hourAgo(), dry_run: true },
    });
    expectStatus(dryRun, 200);
    expect(dryRun.body).toEqual({ count: 4 });
    expect(receiver.on(path).length).toBe(sentBefore);

    const recovered = await http(server, "POST", `/v1/webhooks/${endpoint.id}/recover`, { body: { since: hourAgo() } });
    expectStatus(recovered, 202);
    expect(recovered.body).toEqual({ count: 4 });
    const again = (await receiver.waitForCount(path, sentBefore + 4, 20_000)).slice(sentBefore);
    // Creation order, each with the id and the exact bytes of its first attempt.
    const createdOrder = [...failed].reverse().map((delivery: { id: string }) => delivery.id);
    expect(again.map((hook) => hook.webhookId)).toEqual(createdOrder);
    for (const hook of again) {
      expect(hook.body).toBe(firstBodies.get(hook.webhookId));
      expect(hook.verifiedBy).toEqual([endpoint.secret]);
    }
    const succeeded = await eventually(
      async () => {
        const deliveries = await listDeliveries(server, endpoint.id, "?status=succeeded");
        return deliveries.length === 4 && deliveries;
      },
      10_000,
      "the recovered deliveries to succeed",
    );
    // Recovery gave them a fresh schedule but kept counting: three failed attempts, then the one that succeeded.
    expect(succeeded.map((delivery: { attempt_count: number }) => delivery.attempt_count)).toEqual([4, 4, 4, 4]);
    // Nothing failed is left in the window.
    const none = await http(server, "POST", `/v1/webhooks/${endpoint.id}/recover`, { body: { since: hourAgo() } });
    expect(none.body).toEqual({ count: 0 });
  }, 60_000);

  it("replays to an endpoint made afterwards every matching event, oldest first, with the tag snapshot of its time", async () => {
    const tag = (await http(server, "POST", "/v1/tags", { body: { name: `replay-${kind}` } })).body;
    const since = new Date().toISOString();
    const tagged = await createReference(server, { tags: [{ id: tag.id }] });
    const other = await createReference(server);
    await writeExtractions(server, tagged.id, 11);
    await writeExtractions(server, other.id, 3);
    // Detached after the events: their bodies still carry it (the snapshot of their time).
    expectStatus(await http(server, "DELETE", `/v1/references/${tagged.id}/tags/${tag.id}`), 204);
    const log = (await http(server, "GET", `/v1/references/${tagged.id}/events?limit=100`)).body.data;
    expect(log).toHaveLength(12);

    const path = `/${kind}/replay-new`;
    const endpoint = await createEndpoint(server, {
      url: receiver.url(path),
      tag_ids: [tag.id],
      event_types: ["extraction_succeeded"],
    });
    receiver.verifyWith(path, endpoint.secret);
    const replayed = await http(server, "POST", `/v1/webhooks/${endpoint.id}/replay`, { body: { since } });
    expectStatus(replayed, 202);
    expect(replayed.body).toEqual({ count: 11 });

    const hooks = await receiver.waitForCount(path, 11, 20_000);
    const expected = log.filter((event: { type: string }) => event.type === "extraction_succeeded");
    expect(hooks.map((hook) => hook.json.id)).toEqual(expected.map((event: { id: string }) => event.id));
    for (const hook of hooks) {
      expect(hook.json.reference_tags).toEqual([{ id: tag.id, name: tag.name }]);
      expect(hook.verifiedBy).toEqual([endpoint.secret]);
    }
    expect(new Set(hooks.map((hook) => hook.webhookId)).size).toBe(11);

    // A second replay sends the same events under the same webhook-ids: receivers deduplicate by them.
    const second = await http(server, "POST", `/v1/webhooks/${endpoint.id}/replay`, { body: { since } });
    expect(second.body).toEqual({ count: 11 });
    const twice = (await receiver.waitForCount(path, 22, 20_000)).slice(11);
    expect(twice.map((hook) => hook.webhookId)).toEqual(hooks.map((hook) => hook.webhookId));
    expect(twice.map((hook) => hook.body)).toEqual(hooks.map((hook) => hook.body));
    expect(await listDeliveries(server, endpoint.id, "?limit=100")).toHaveLength(11);
  }, 60_000);

  it("replays to an endpoint that had the events under their original webhook-ids", async () => {
    const path = `/${kind}/replay-existing`;
    const endpoint = await createEndpoint(server, { url: receiver.url(path) });
    const since = new Date().toISOString();
    const reference = await createReference(server);
    await writeExtractions(server, reference.id, 6);
    const first = await receiver.waitForCount(path, 7, 20_000);
    const replayed = await http(server, "POST", `/v1/webhooks/${endpoint.id}/replay`, { body: { since } });
    expect(replayed.body).toEqual({ count: 7 });
    const again = (await receiver.waitForCount(path, 14, 20_000)).slice(7);
    const idsByEvent = new Map(first.map((hook) => [hook.json.id, hook.webhookId]));
    for (const hook of again) expect(hook.webhookId).toBe(idsByEvent.get(hook.json.id));
    expect(new Set(again.map((hook) => hook.json.id)).size).toBe(7);
  }, 60_000);

  it("resumes a replay stopped with its instance where it stopped, one replay per endpoint at a time", async () => {
    const path = `/${kind}/replay-restart`;
    const endpoint = await createEndpoint(server, { url: receiver.url(path) });
    const since = new Date().toISOString();
    const reference = await createReference(server);
    await writeExtractions(server, reference.id, 22);
    const events = (await http(server, "GET", `/v1/references/${reference.id}/events?limit=100`)).body.data;
    expect(events).toHaveLength(23);
    // From the fourth request on, the receiver holds its answers until the test lets go: the replay (batches of 5,
    // the next once at most half the previous one is pending) stops after its second batch, mid-window.
    let letGo: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (letGo = resolve));
    receiver.respond(path, ({ count }) => (count > 3 ? { until: gate } : {}));
    const replayRow = async () =>
      (
        await server.database.sql.all<{ remaining: number | bigint }>(Prisma.sql`
          SELECT "remaining" FROM "webhook_replays" WHERE "endpoint_id" = ${endpoint.id}`)
      )[0];

    const first = await startInstanceOn(server, { env: ENV });
    try {
      const replayed = await http(first, "POST", `/v1/webhooks/${endpoint.id}/replay`, { body: { since } });
      expect(replayed.body).toEqual({ count: 23 });
      await receiver.waitForCount(path, 4, 20_000);
      await eventually(async () => Number((await replayRow())?.remaining ?? 23) < 23, 20_000, "a batch scheduled");
      // The database holds one replay per endpoint, whichever instance is asked.
      const again = await http(server, "POST", `/v1/webhooks/${endpoint.id}/replay`, { body: { since } });
      expect(again.status).toBe(409);
      expect(again.body.code).toBe("CONFLICT");
    } finally {
      await first.close();
    }
    const left = Number((await replayRow())?.remaining);
    expect(left).toBeGreaterThan(0);
    letGo();
    const restarted = await startInstanceOn(server, { env: ENV });
    try {
      await receiver.waitFor(
        () => new Set(receiver.on(path).map((hook) => hook.json.id)).size === 23,
        30_000,
        "every event of the window",
      );
      await eventually(async () => (await replayRow()) === undefined, 20_000, "the replay's row to go");
    } finally {
      await restarted.close();
    }
    // Every event once, under one webhook-id each (a request cut by the stop may come again under the same one).
    const hooks = receiver.on(path);
    expect(new Set(hooks.map((hook) => hook.json.id))).toEqual(
      new Set(events.map((event: { id: string }) => event.id)),
    );
    const idsByEvent = new Map<string, Set<string>>();
    for (const hook of hooks)
      idsByEvent.set(hook.json.id, (idsByEvent.get(hook.json.id) ?? new Set()).add(hook.webhookId));
    expect([...idsByEvent.values()].every((ids) => ids.size === 1)).toBe(true);
    expect(await listDeliveries(server, endpoint.id, "?limit=100")).toHaveLength(23);
  }, 90_000);

  it("takes one of many replay requests racing on two instances and refuses the others with 409", async () => {
    const path = `/${kind}/replay-race`;
    const endpoint = await createEndpoint(server, { url: receiver.url(path) });
    const since = new Date().toISOString();
    const reference = await createReference(server);
    await writeExtractions(server, reference.id, 22);
    // The receiver holds every answer until the test lets go, so the replay (23 events, batches of 5) stays
    // in progress while the requests race: whether one is refused is the replays table's key, not timing.
    let letGo: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (letGo = resolve));
    receiver.respond(path, () => ({ until: gate }));
    const second = await startInstanceOn(server, { env: ENV });
    try {
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, index) =>
          http(index % 2 === 0 ? server : second, "POST", `/v1/webhooks/${endpoint.id}/replay`, { body: { since } }),
        ),
      );
      const statuses = answers.map((answer) => answer.status).sort();
      expect(statuses).toEqual([202, 409, 409, 409, 409, 409, 409, 409]);
      expect(answers.find((answer) => answer.status === 202)?.body).toEqual({ count: 23 });
      for (const refused of answers.filter((answer) => answer.status === 409))
        expect(refused.body.code).toBe("CONFLICT");
      letGo();
      await receiver.waitFor(
        () => new Set(receiver.on(path).map((hook) => hook.json.id)).size === 23,
        30_000,
        "every event of the window",
      );
    } finally {
      letGo();
      await second.close();
    }
    expect(await listDeliveries(server, endpoint.id, "?limit=100")).toHaveLength(23);
  }, 60_000);

  it("resumes a replay whose instance died once its lease has expired", async () => {
    const path = `/${kind}/replay-dead-instance`;
    const endpoint = await createEndpoint(server, { url: receiver.url(path) });
    const since = new Date(Date.now() - 1_000);
    const reference = await createReference(server);
    await writeExtractions(server, reference.id, 7);
    const events = (await http(server, "GET", `/v1/references/${reference.id}/events?limit=100`)).body.data;
    expect(events).toHaveLength(8);
    // What a crash leaves: the replay's row, its first three events scheduled (their deliveries went out with
    // the endpoint's live traffic), leased by an instance that is gone, the lease run out.
    const third = events[2];
    const expired = new Date(Date.now() - 1_000);
    await server.database.sql.run(Prisma.sql`
      INSERT INTO "webhook_replays" ("endpoint_id", "organization_id", "since", "until", "remaining",
        "after_occurred_at", "after_event_id", "lease_owner", "lease_expires_at", "created_at")
      VALUES (${endpoint.id}, ${server.organizationId}, ${since}, ${new Date()}, 5,
        ${new Date(third.occurred_at)}, ${third.id}, 'a dead instance', ${expired}, ${expired})`);
    const live = await receiver.waitForCount(path, 8, 20_000);
    const resumed = (await receiver.waitForCount(path, 13, 20_000)).slice(live.length);
    expect(resumed.map((hook) => hook.json.id)).toEqual(events.slice(3).map((event: { id: string }) => event.id));
    const liveIds = new Map(live.map((hook) => [hook.json.id, hook.webhookId]));
    for (const hook of resumed) expect(hook.webhookId).toBe(liveIds.get(hook.json.id));
    await eventually(
      async () =>
        (
          await server.database.sql.all(Prisma.sql`
            SELECT 1 FROM "webhook_replays" WHERE "endpoint_id" = ${endpoint.id}`)
        ).length === 0,
      20_000,
      "the replay's row to go",
    );
  }, 60_000);

  it("refuses bad windows with 422 and a pointer, unknown endpoints with 404", async () => {
    const endpoint = await createEndpoint(server, { url: receiver.url(`/${kind}/windows`) });
    for (const action of ["recover", "replay"]) {
      const at = `/v1/webhooks/${endpoint.id}/${action}`;
      const old = await http(server, "POST", at, { body: { since: "2000-01-01T00:00:00Z" } });
      expect(old.status).toBe(422);
      expect(old.body.errors[0]).toMatchObject({ pointer: "/since", code: "BEFORE_RETENTION" });
      const inverted = await http(server, "POST", at, {
        body: { since: hourAgo(), until: new Date(Date.now() - 7_200_000).toISOString() },
      });
      expect(inverted.status).toBe(422);
      expect(inverted.body.errors[0]).toMatchObject({ pointer: "/since", code: "AFTER_UNTIL" });
      const missing = await http(server, "POST", at, { body: {} });
      expect(missing.status).toBe(422);
      expect(missing.body.errors[0].pointer).toBe("/since");
      const malformed = await http(server, "POST", at, { body: { since: "yesterday" } });
      expect(malformed.status).toBe(422);
      expect(malformed.body.errors[0].pointer).toBe("/since");
      expect(
        (await http(server, "POST", `/v1/webhooks/${crypto.randomUUID()}/${action}`, { body: { since: hourAgo() } }))
          .status,
      ).toBe(404);
      const stranger = await server.newOrganization("stranger");
      const foreign = await http({ url: server.url, apiKey: stranger.apiKey }, "POST", at, {
        body: { since: hourAgo() },
      });
      expect(foreign.status).toBe(404);
    }
  });

  it("refuses more than 100,000 deliveries, saying how many matched, and writes nothing", async () => {
    const endpoint = await createEndpoint(server, { url: receiver.url(`/${kind}/bulk`) });
    const createdAt = new Date(Date.now() - 60_000);
    await server.database.sql.run(Prisma.sql`
      WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100001)
      INSERT INTO "webhook_deliveries" ("id", "organization_id", "endpoint_id", "event_id", "event_type", "body",
        "status", "attempt_count", "next_attempt_at", "lease_owner", "lease_expires_at", "created_at", "updated_at",
        "ordering_key", "event_occurred_at")
      SELECT 'bulk-' || CAST(i AS TEXT), ${server.organizationId}, ${endpoint.id}, 'event-' || CAST(i AS TEXT),
        'extraction_succeeded', '{}', 'failed', 3, NULL, NULL, NULL, ${createdAt}, ${createdAt}, NULL, ${createdAt}
      FROM n`);
    const refused = await http(server, "POST", `/v1/webhooks/${endpoint.id}/recover`, { body: { since: hourAgo() } });
    expect(refused.status).toBe(422);
    expect(refused.body).toMatchObject({ code: "LIMIT_EXCEEDED", limit: 100_000, matched: 100_001 });
    expect(refused.body.detail).toContain("100001");
    expect((await listDeliveries(server, endpoint.id, "?status=pending")).length).toBe(0);
    const counted = await http(server, "POST", `/v1/webhooks/${endpoint.id}/recover`, {
      body: { since: hourAgo(), dry_run: true },
    });
    expect(counted.body).toEqual({ count: 100_001 });
    expectStatus(await http(server, "DELETE", `/v1/webhooks/${endpoint.id}`), 204);
  }, 60_000);

  it("offers the ordering field and both mutations over GraphQL", async () => {
    const path = `/${kind}/graphql`;
    receiver.respond(path, () => ({ status: 500 }));
    const created = await gql(
      server,
      `mutation($url: String!) { createWebhookEndpoint(input: { url: $url, ordering: REFERENCE }) {
         webhookEndpoint { id ordering heldBack { references deliveries oldest { eventId } } } } }`,
      { url: receiver.url(path) },
    );
    expect(created.body.errors).toBeUndefined();
    const endpoint = created.body.data.createWebhookEndpoint.webhookEndpoint;
    expect(endpoint).toMatchObject({ ordering: "REFERENCE", heldBack: { references: 0, deliveries: 0, oldest: null } });
    const since = new Date().toISOString();
    const reference = await createReference(server);
    await eventually(
      async () => (await listDeliveries(server, endpoint.id, "?status=failed")).length === 1,
      20_000,
      "the delivery to be given up",
    );
    receiver.respond(path, () => ({}));
    const dry = await gql(
      server,
      `mutation($id: ID!, $since: DateTime!) { recoverWebhookDeliveries(endpointId: $id, since: $since, dryRun: true) }`,
      { id: endpoint.id, since },
    );
    expect(dry.body.data).toEqual({ recoverWebhookDeliveries: 1 });
    const recovered = await gql(
      server,
      `mutation($id: ID!, $since: DateTime!) { recoverWebhookDeliveries(endpointId: $id, since: $since) }`,
      { id: endpoint.id, since },
    );
    expect(recovered.body.data).toEqual({ recoverWebhookDeliveries: 1 });
    const replayed = await gql(
      server,
      `mutation($id: ID!, $since: DateTime!, $until: DateTime) {
         replayWebhookEvents(endpointId: $id, since: $since, until: $until) }`,
      { id: endpoint.id, since, until: new Date(Date.now() + 1_000).toISOString() },
    );
    expect(replayed.body.data).toEqual({ replayWebhookEvents: 1 });
    await eventually(
      async () => receiver.on(path).filter((hook) => hook.json.reference_id === reference.id).length >= 5,
      20_000,
      "the recovered and replayed sends",
    );
    const refused = await gql(
      server,
      `mutation($id: ID!) { replayWebhookEvents(endpointId: $id, since: "2000-01-01T00:00:00Z") }`,
      { id: endpoint.id },
    );
    expect(refused.body.errors?.[0]?.extensions?.code).toBe("VALIDATION_FAILED");
    const unknown = await gql(
      server,
      `mutation($id: ID!) { recoverWebhookDeliveries(endpointId: $id, since: "${since}") }`,
      { id: crypto.randomUUID() },
    );
    expect(unknown.body.errors?.[0]?.extensions?.code).toBe("NOT_FOUND");
  }, 60_000);
});
