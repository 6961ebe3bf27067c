import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { gqlData } from "./support/graphql-client.ts";
import { subscribeOverSse, type SseSubscription } from "./support/sse-client.ts";
import {
  eventually,
  metricValue,
  subscribe,
  waitForOpenSubscriptions,
  type TestSubscription,
} from "./support/subscription-client.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Subscription.lifecycleEvents over Server-Sent Events at /graphql/stream (graphql-sse, distinct connections
 * mode), with graphql-sse's own client against a real server: the same events in the same order as graphql-ws
 * for the same writes, resume after a cursor, the key in a header (401 before any stream), the same document
 * limits (400 with GraphQL errors), organization isolation and the bound on open streams.
 */

const ENV = {
  SUBSCRIPTION_POLL_INTERVAL: "100ms",
  SUBSCRIPTION_AUTH_RECHECK_INTERVAL: "100ms",
  SUBSCRIPTION_MAX_STREAMS_PER_ORGANIZATION: "3",
  WEBHOOK_WORKER: "off",
};

const EVENTS = `
  subscription Events($referenceId: ID, $after: String) {
    lifecycleEvents(referenceId: $referenceId, after: $after) {
      cursor
      node { id type referenceId }
    }
  }`;

interface EventMessage {
  lifecycleEvents: { cursor: string; node: { id: string; type: string; referenceId: string } };
}

const eventsOf = (subscription: { data: EventMessage[] }) =>
  subscription.data.map((message) => [message.lifecycleEvents.node.id, message.lifecycleEvents.cursor]);

describe.each(DATABASE_KINDS)("subscriptions over SSE on %s", (kind) => {
  let server: TestServer;
  const open: { dispose(): unknown }[] = [];
  let bookings = 0;

  const overSse = (variables: Record<string, unknown> = {}, on: Pick<TestServer, "url" | "apiKey"> = server) => {
    const subscription = subscribeOverSse<EventMessage>(on, EVENTS, variables);
    open.push(subscription);
    return subscription;
  };

  async function createReference(on: Pick<TestServer, "url" | "apiKey"> = server): Promise<string> {
    const data = await gqlData(
      on,
      `mutation ($input: CreateReferenceInput!) { createReference(input: $input) { reference { id } } }`,
      { input: { bookingNumber: `BK-SSE-${kind}-${++bookings}`, carrierCode: "MAEU" } },
    );
    return data.createReference.reference.id;
  }

  async function recordExtraction(referenceId: string, on: Pick<TestServer, "url" | "apiKey"> = server) {
    await gqlData(
      on,
      `mutation ($input: RecordExtractionInput!) { recordExtraction(input: $input) { reference { id } } }`,
      { input: { referenceId, status: "SUCCEEDED" } },
    );
  }

  beforeAll(async () => {
    server = await startTestServer(kind, { env: ENV });
  });
  afterEach(async () => {
    for (const subscription of open.splice(0)) await subscription.dispose();
    // Every stream ended on the server before the next test counts open subscriptions.
    await eventually(async () => (await metricValue(server, "reftrail_subscriptions_open")) === 0);
  });
  afterAll(async () => {
    await server?.close();
  });

  it("sends the same events in the same order as graphql-ws, and resumes after a cursor with no gap or duplicate", async () => {
    const overWs: TestSubscription<EventMessage> = subscribe<EventMessage>(server, EVENTS);
    open.push(overWs);
    const sse = overSse();
    await waitForOpenSubscriptions(server, 2);

    // Two references written in turn: live order interleaves them.
    const first = await createReference();
    const second = await createReference();
    for (let round = 0; round < 3; round++) {
      await recordExtraction(first);
      await recordExtraction(second);
    }
    await overWs.waitFor(8);
    await sse.waitFor(8);
    expect(eventsOf(sse)).toEqual(eventsOf(overWs));
    expect(eventsOf(sse)).toHaveLength(8);

    // Resume after the third event, with more written meanwhile: the rest, once each, in the same order.
    sse.dispose();
    await recordExtraction(first);
    await overWs.waitFor(9);
    const resumed = overSse({ after: sse.data[2]!.lifecycleEvents.cursor });
    await recordExtraction(second);
    await overWs.waitFor(10);
    await resumed.waitFor(7);
    expect(eventsOf(resumed)).toEqual(eventsOf(overWs).slice(3));
  });

  it("refuses a missing or unknown key with 401 before any stream", async () => {
    for (const apiKey of [null, "rt_not-a-key"]) {
      const refused = subscribeOverSse(server, EVENTS, {}, { apiKey });
      open.push(refused);
      await refused.ended;
      expect(refused.status()).toBe(401);
      expect(refused.errors[0]?.extensions?.code).toBe("UNAUTHENTICATED");
    }
  });

  it("ends a stream whose key is revoked, and refuses the key afterwards", async () => {
    const key = await server.app.services.organizations.createApiKey(server.organizationId);
    const keyed = { url: server.url, apiKey: key.key };
    const streaming = overSse({}, keyed);
    await waitForOpenSubscriptions(server, 1);
    await server.app.services.organizations.revokeApiKey(key.id);
    await streaming.ended;
    await eventually(async () => (await metricValue(server, "reftrail_subscriptions_open")) === 0);
    const refused = overSse({}, keyed);
    await refused.ended;
    expect(refused.status()).toBe(401);
  });

  it("refuses a document past the same limits as graphql-ws with 400 and its GraphQL errors", async () => {
    const refusal = async (query: string) => {
      const refused = subscribeOverSse(server, query);
      open.push(refused);
      await refused.ended;
      return { status: refused.status(), error: refused.errors[0] };
    };
    const deep = `subscription { lifecycleEvents { node { reference { ${"parent { ".repeat(12)}id${" }".repeat(12)} } } } }`;
    expect(await refusal(deep)).toMatchObject({
      status: 400,
      error: { extensions: { code: "GRAPHQL_VALIDATION_FAILED", limit: { kind: "depth" } } },
    });
    const costly = `subscription { lifecycleEvents { node { reference { events(first: 500) { edges { node { reference { events(first: 500) { edges { node { id } } } } } } } } } } }`;
    expect(await refusal(costly)).toMatchObject({
      status: 400,
      error: { extensions: { code: "GRAPHQL_VALIDATION_FAILED", limit: { kind: "cost" } } },
    });
    expect(await refusal("subscription { lifecycleEvents { ")).toMatchObject({
      status: 400,
      error: { extensions: { code: "GRAPHQL_PARSE_FAILED" } },
    });
    expect(await refusal("{ __typename }")).toMatchObject({
      status: 400,
      error: { extensions: { code: "BAD_REQUEST" } },
    });
  });

  it("never sends another organization's events", async () => {
    const other = await server.newOrganization("other");
    const otherServer = { url: server.url, apiKey: other.apiKey };
    const theirs = overSse({}, otherServer);
    const ours = overSse();
    await waitForOpenSubscriptions(server, 2);

    const reference = await createReference();
    await recordExtraction(reference);
    const otherReference = await createReference(otherServer);
    await ours.waitFor(2);
    // Live order: our events committed before theirs, so they would have come first.
    await theirs.waitFor(1);
    expect(theirs.data.map((message) => message.lifecycleEvents.node.referenceId)).toEqual([otherReference]);
    expect(ours.data.every((message) => message.lifecycleEvents.node.referenceId === reference)).toBe(true);
  });

  it("bounds the streams an organization holds open at once", async () => {
    const streams: SseSubscription[] = [overSse(), overSse(), overSse()];
    await waitForOpenSubscriptions(server, 3);
    const refused = overSse();
    await refused.ended;
    expect(refused.status()).toBe(429);
    // Like every 429 of the API, it says when to try again.
    expect(Number(refused.retryAfter())).toBeGreaterThan(0);
    expect(refused.errors[0]?.extensions).toMatchObject({ code: "LIMIT_EXCEEDED", limit: 3 });

    // A place given back is free again.
    streams[0]!.dispose();
    await eventually(async () => (await metricValue(server, "reftrail_subscriptions_open")) === 2);
    const reference = await createReference();
    const again = overSse({ referenceId: reference });
    // Live from its registration on: the event is written once the stream is open.
    await waitForOpenSubscriptions(server, 3);
    await recordExtraction(reference);
    await again.waitFor(1);
  });
});
