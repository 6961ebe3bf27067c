import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { eventually, metricValue, subscribe } from "./support/subscription-client.ts";
import { startInstanceOn, startTestServer, DATABASE_KINDS, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, type Caller } from "./support/webhooks.ts";
import { http } from "./support/http.ts";

/*
 * `Subscription.webhookDeliveryAttempts` (the operator page's live feed) over graphql-ws: a message per change
 * of a delivery (queued by hand, attempt recorded), scoped to the organization and optionally one endpoint; and,
 * on PostgreSQL, changes made by another instance's worker reach a subscriber through LISTEN/NOTIFY.
 */

const SUBSCRIPTION = `subscription ($endpointId: ID) {
  webhookDeliveryAttempts(endpointId: $endpointId) {
    id endpointId eventType status attemptCount attempts { statusCode responseBody }
  }
}`;
const ENV = { WEBHOOK_RETRY_SCHEDULE: "0s", WEBHOOK_POLL_INTERVAL: "100ms" };

/** Waits until `count` webhookDeliveryAttempts streams see changes on the server (there is no replay). */
async function waitForStreams(server: Pick<TestServer, "url">, count: number): Promise<void> {
  await eventually(
    async () => (await metricValue(server, "reftrail_delivery_activity_subscriptions_open")) >= count,
    15_000,
    () => `${count} open webhookDeliveryAttempts subscriptions`,
  );
}

describe.each(DATABASE_KINDS)("webhookDeliveryAttempts on %s", (kind) => {
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

  it("sends each change of the endpoint's deliveries, read after the change, and nothing of other endpoints", async () => {
    const { apiKey } = await server.newOrganization("feed");
    const caller: Caller = { url: server.url, apiKey };
    receiver.respond(`/${kind}/feed`, () => ({ status: 200, body: "ok" }));
    const watched = await createEndpoint(caller, { url: receiver.url(`/${kind}/feed`) });
    const other = await createEndpoint(caller, { url: receiver.url(`/${kind}/feed-other`) });
    const feed = subscribe(caller, SUBSCRIPTION, { endpointId: watched.id });
    const everything = subscribe(caller, SUBSCRIPTION, {});
    try {
      await waitForStreams(server, 2);
      expect((await http(caller, "POST", `/v1/webhooks/${other.id}/test`)).status).toBe(202);
      expect((await http(caller, "POST", `/v1/webhooks/${watched.id}/test`)).status).toBe(202);
      await feed.waitFor(() => feed.data.some((message) => message.webhookDeliveryAttempts.status === "SUCCEEDED"));
      const last = feed.data.at(-1)!.webhookDeliveryAttempts;
      expect(last).toMatchObject({ endpointId: watched.id, eventType: "WEBHOOK_TEST", attemptCount: 1 });
      expect(last.attempts).toEqual([{ statusCode: 200, responseBody: "ok" }]);
      expect(feed.data.every((message) => message.webhookDeliveryAttempts.endpointId === watched.id)).toBe(true);
      await everything.waitFor(
        () => new Set(everything.data.map((message) => message.webhookDeliveryAttempts.endpointId)).size === 2,
      );
      expect(feed.errors).toEqual([]);
    } finally {
      await feed.dispose();
      await everything.dispose();
    }
  });

  it("refuses an endpoint of another organization as NOT_FOUND", async () => {
    const { apiKey } = await server.newOrganization("stranger");
    const theirs = await createEndpoint({ url: server.url, apiKey }, { url: receiver.url(`/${kind}/theirs`) });
    const attempt = subscribe(server, SUBSCRIPTION, { endpointId: theirs.id });
    try {
      await attempt.waitFor(() => attempt.errors.length > 0);
      expect(attempt.errors[0]?.extensions?.code).toBe("NOT_FOUND");
    } finally {
      await attempt.dispose();
    }
  });
});

describe("webhookDeliveryAttempts across instances on postgres", () => {
  let server: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer("postgres", { env: ENV });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("reaches a subscriber on another instance (LISTEN/NOTIFY)", async () => {
    // The second instance sends nothing itself: whatever its subscriber sees was recorded by the first.
    const quiet = await startInstanceOn(server, { env: { ...ENV, WEBHOOK_WORKER: "off" } });
    try {
      const path = "/postgres/across";
      receiver.respond(path, () => ({ status: 200, body: "across" }));
      const endpoint = await createEndpoint(server, { url: receiver.url(path) });
      const feed = subscribe(quiet, SUBSCRIPTION, { endpointId: endpoint.id });
      try {
        await waitForStreams(quiet, 1);
        expect((await http(server, "POST", `/v1/webhooks/${endpoint.id}/test`)).status).toBe(202);
        await feed.waitFor(
          () => feed.data.some((message) => message.webhookDeliveryAttempts.status === "SUCCEEDED"),
          15_000,
        );
        expect(feed.data.at(-1)!.webhookDeliveryAttempts.attempts).toEqual([
          { statusCode: 200, responseBody: "across" },
        ]);
      } finally {
        await feed.dispose();
      }
    } finally {
      await quiet.close();
    }
  });
});
