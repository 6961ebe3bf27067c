import { request as httpRequest, type IncomingMessage } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import WebSocket from "ws";
import { LiveFeed } from "../src/live/live-feed.ts";
import { LiveSubscriptions, type StreamMessage } from "../src/live/live-subscriptions.ts";
import { comparePositions } from "../src/domain/live/log-position.ts";
import type { Services } from "../src/domain/services.ts";
import { StreamCursors } from "../src/domain/live/stream-cursor.ts";
import { CursorCodec } from "../src/domain/shared/cursor.ts";
import { SqlLiveLogStore } from "../src/store/sql/live-log-store.ts";
import { quietLog, silentSignals } from "./support/live-feed.ts";
import { eventually, graphqlWsUrl, metricValue } from "./support/subscription-client.ts";
import {
  DATABASE_KINDS,
  startTestServer,
  startTestServices,
  type TestServer,
  type TestServices,
} from "./support/test-server.ts";

/*
 * Slow consumers are bounded: a subscription holds at most SUBSCRIPTION_MAX_QUEUED_EVENTS live
 * events for its client. Past that it drops them and reads the log again from its position once the client
 * reads on, so memory stays bounded and the client still gets every event, in order, once. Over graphql-ws and
 * over Server-Sent Events alike: each transport takes the next event only once the last has left for the socket.
 */

describe.each(DATABASE_KINDS)("a subscription nobody reads, on %s", (kind) => {
  let started: TestServices;
  let services: Services;
  let store: SqlLiveLogStore;
  let feed: LiveFeed;
  let streams: LiveSubscriptions;

  beforeAll(async () => {
    started = await startTestServices(kind);
    services = started.services;
    store = new SqlLiveLogStore(started.database);
    // No signals: the feed finds every event by polling, every 20 ms.
    feed = new LiveFeed(store, silentSignals, { pollIntervalMs: 20, batchSize: 7 }, quietLog);
    streams = new LiveSubscriptions(
      feed,
      store,
      (organizationId, input) => services.eventFeed.resolveFilter(organizationId, input),
      new StreamCursors(new CursorCodec("test"), store),
      () => new Date(0),
      { maxQueuedEvents: 10, pageSize: 6 },
    );
  });

  afterAll(async () => {
    await streams?.close();
    await started?.close();
  });

  it("holds at most its bound, then catches up from the log with every event once, in order", async () => {
    const { organization } = await services.organizations.createOrganization("slow");
    const reference = await services.references.createReference(organization.id, {
      bookingNumber: "BK-SLOW",
      carrierCode: "MAEU",
    });
    const stream = await streams.open(organization.id, { referenceId: reference.id });

    for (let i = 0; i < 45; i++)
      await services.referenceTracking.recordExtraction(organization.id, reference.id, { status: "succeeded" });
    const last = (await services.lifecycleLog.listEvents(organization.id, reference.id, { limit: 500, order: "desc" }))
      .items[0]!;
    const lastPosition = (await store.findPosition(organization.id, last.id))!;
    await eventually(() => comparePositions(feed.frontier, lastPosition) >= 0);
    expect(stream.buffered).toBeLessThanOrEqual(10);
    expect(streams.stats().fellBehind).toBeGreaterThan(0);

    // More events arrive while the consumer catches up.
    const received: StreamMessage[] = [];
    for (let i = 0; i < 45; i++) {
      const next = await stream.next();
      received.push(next.value!);
      if (i % 10 === 0)
        await services.referenceTracking.recordExtraction(organization.id, reference.id, { status: "succeeded" });
      expect(stream.buffered).toBeLessThanOrEqual(10);
    }
    for (let i = 0; i < 5; i++) received.push((await stream.next()).value!);

    const log = (await services.lifecycleLog.listEvents(organization.id, reference.id, { limit: 500 })).items.slice(1);
    expect(log).toHaveLength(50);
    expect(received.map((message) => message.event.id)).toEqual(log.map((event) => event.id));
    await stream.return();
    expect(streams.stats().open).toBe(0);
  });
});

describe("a graphql-ws client that stops reading its socket", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer("sqlite", {
      env: {
        SUBSCRIPTION_POLL_INTERVAL: "50ms",
        SUBSCRIPTION_MAX_QUEUED_EVENTS: "5",
      },
    });
  });

  afterAll(async () => {
    await server?.close();
  });

  it("costs the server a bounded queue, and still receives everything once it reads again", async () => {
    const { organizationId } = server;
    const { references, referenceTracking } = server.app.services;
    const reference = await references.createReference(organizationId, {
      bookingNumber: "BK-PAUSED",
      carrierCode: "MAEU",
    });

    // The graphql-transport-ws protocol by hand, so the socket can be paused.
    const socket = new WebSocket(graphqlWsUrl(server), "graphql-transport-ws");
    const messages: { type: string; payload?: any }[] = [];
    socket.on("message", (raw) => messages.push(JSON.parse(String(raw))));
    await new Promise((resolve) => socket.once("open", resolve));
    socket.send(JSON.stringify({ type: "connection_init", payload: { "x-api-key": server.apiKey } }));
    await eventually(() => messages.some((message) => message.type === "connection_ack"));
    socket.send(
      JSON.stringify({
        id: "1",
        type: "subscribe",
        payload: {
          query: "subscription ($id: ID) { lifecycleEvents(referenceId: $id) { cursor node { id detail } } }",
          variables: { id: reference.id },
        },
      }),
    );
    await eventually(async () => (await metricValue(server, "reftrail_subscriptions_open")) === 1);
    socket.pause();

    // ~25 MB of messages: more than the kernel's socket buffers hold, so the server's sends wait.
    const document = { padding: "x".repeat(250_000) };
    const total = 100;
    for (let i = 0; i < total; i++)
      await referenceTracking.recordUpdate(organizationId, reference.id, { ...document, n: i });
    await eventually(async () => (await metricValue(server, "reftrail_subscription_fell_behind_total")) > 0, 15_000);
    expect(await metricValue(server, "reftrail_subscription_buffered_events")).toBeLessThanOrEqual(5);

    socket.resume();
    const nexts = () => messages.filter((message) => message.type === "next");
    await eventually(
      () => nexts().length >= total,
      20_000,
      () => `${total} messages (got ${nexts().length})`,
    );
    const log = (
      await server.app.services.lifecycleLog.listEvents(organizationId, reference.id, { limit: 500 })
    ).items.slice(1);
    expect(nexts().map((message) => message.payload.data.lifecycleEvents.node.id)).toEqual(
      log.map((event) => event.id),
    );
    expect(nexts().map((message) => message.payload.data.lifecycleEvents.node.detail.update.n)).toEqual([
      ...Array(total).keys(),
    ]);
    socket.close();
  }, 60_000);
});

describe("an SSE client that stops reading its stream", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer("sqlite", {
      env: { SUBSCRIPTION_POLL_INTERVAL: "50ms", SUBSCRIPTION_MAX_QUEUED_EVENTS: "5", WEBHOOK_WORKER: "off" },
    });
  });

  afterAll(async () => {
    await server?.close();
  });

  it("costs the server a bounded queue, and still receives everything once it reads again", async () => {
    const { organizationId } = server;
    const { references, referenceTracking } = server.app.services;
    const reference = await references.createReference(organizationId, {
      bookingNumber: "BK-PAUSED-SSE",
      carrierCode: "MAEU",
    });

    // The graphql-sse protocol by hand (distinct connections mode), so the response can be paused.
    let text = "";
    const response = await new Promise<IncomingMessage>((resolve, reject) => {
      const request = httpRequest(`${server.url}/graphql/stream`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream", "x-api-key": server.apiKey },
      });
      request.once("response", resolve).once("error", reject);
      request.end(
        JSON.stringify({
          query: "subscription ($id: ID) { lifecycleEvents(referenceId: $id) { cursor node { id detail } } }",
          variables: { id: reference.id },
        }),
      );
    });
    expect(response.statusCode).toBe(200);
    response.setEncoding("utf8");
    response.on("data", (chunk: string) => (text += chunk));
    await eventually(async () => (await metricValue(server, "reftrail_subscriptions_open")) === 1);
    response.pause();

    // ~25 MB of messages: more than the kernel's socket buffers hold, so the server's writes wait.
    const document = { padding: "x".repeat(250_000) };
    const total = 100;
    for (let i = 0; i < total; i++)
      await referenceTracking.recordUpdate(organizationId, reference.id, { ...document, n: i });
    await eventually(async () => (await metricValue(server, "reftrail_subscription_fell_behind_total")) > 0, 15_000);
    expect(await metricValue(server, "reftrail_subscription_buffered_events")).toBeLessThanOrEqual(5);

    response.resume();
    const nexts = () =>
      text
        .split("\n\n")
        .filter((message) => message.startsWith("event: next\n"))
        .map((message) => JSON.parse(message.slice(message.indexOf("data: ") + "data: ".length)));
    await eventually(
      () => text.split("event: next\n").length - 1 >= total && text.endsWith("\n\n"),
      20_000,
      () => `${total} messages`,
    );
    const log = (
      await server.app.services.lifecycleLog.listEvents(organizationId, reference.id, { limit: 500 })
    ).items.slice(1);
    expect(nexts().map((message) => message.data.lifecycleEvents.node.id)).toEqual(log.map((event) => event.id));
    expect(nexts().map((message) => message.data.lifecycleEvents.node.detail.update.n)).toEqual([
      ...Array(total).keys(),
    ]);
    response.destroy();
  }, 60_000);
});
