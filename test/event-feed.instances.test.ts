import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { poll, pollToEnd, subscribeLikeFeed, subscriptionIds, type FeedFilter } from "./support/event-feed.ts";
import { expectStatus, http } from "./support/http.ts";
import { eventually, waitForOpenSubscriptions, type TestSubscription } from "./support/subscription-client.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * The feed to poll across a restart of the instance a poller reads from, and, on PostgreSQL, across two instances
 * that both write: a poller that follows next_cursor (with long polls) sees exactly what a subscription with the
 * same filters sees on another instance, in the same order. The instances poll the log once an hour: within a
 * test's deadline only commit signals (NOTIFY) can wake a waiting poll.
 */

const SIGNALS_ONLY = { SUBSCRIPTION_POLL_INTERVAL: "1h" };

type Server = Pick<TestServer, "url" | "apiKey">;

let bookings = 0;

async function createReference(on: Server, tags: string[] = []): Promise<string> {
  const created = await http(on, "POST", "/v1/references", {
    body: { booking_number: `BK-FEED-I-${++bookings}`, carrier_code: "MAEU", tags: tags.map((name) => ({ name })) },
  });
  expectStatus(created, 201);
  return created.body.reference.id;
}

async function recordExtraction(on: Server, referenceId: string): Promise<void> {
  expectStatus(
    await http(on, "POST", `/v1/references/${referenceId}/extractions`, { body: { status: "succeeded" } }),
    201,
  );
}

/** Long-polls from `after` until `count` events came; returns their ids. */
async function follow(on: Server, filter: FeedFilter, after: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  let cursor = after;
  while (ids.length < count) {
    const page = await poll(on, filter, { after: cursor, limit: 5, wait: 30 });
    expectStatus(page, 200);
    ids.push(...page.body.data.map((event) => event.id));
    cursor = page.body.next_cursor;
  }
  return ids;
}

describe.each(DATABASE_KINDS)("the feed to poll across a restart on %s", (kind) => {
  let server: TestServer;
  const open: TestSubscription[] = [];

  beforeAll(async () => {
    server = await startTestServer(kind);
  });

  afterEach(async () => {
    await Promise.all(open.splice(0).map((subscription) => subscription.dispose()));
  });

  afterAll(async () => {
    await server?.close();
  });

  it("resumes with its cursor on a new instance: the same events as a subscription, in order", async () => {
    const { apiKey } = await server.newOrganization("feed-restart");
    const references = [
      await createReference({ url: server.url, apiKey }, ["restart"]),
      await createReference({ url: server.url, apiKey }),
    ];
    const filter: FeedFilter = { excludeTagNames: ["restart"], types: ["extraction_succeeded"] };
    const before = await startInstanceOn(server);
    const { cursor } = await pollToEnd({ url: before.url, apiKey }, filter);
    await before.close();

    const subscription = subscribeLikeFeed({ url: server.url, apiKey }, filter, cursor);
    open.push(subscription);
    await waitForOpenSubscriptions(server, 1);
    await Promise.all(
      references.map(async (reference) => {
        for (let i = 0; i < 4; i++) await recordExtraction({ url: server.url, apiKey }, reference);
      }),
    );
    const after = await startInstanceOn(server);
    try {
      const polled = await pollToEnd({ url: after.url, apiKey }, filter, cursor, 3);
      expect(polled.ids).toHaveLength(4);
      await subscription.waitFor(4);
      expect(subscriptionIds(subscription)).toEqual(polled.ids);
    } finally {
      await after.close();
    }
  });
});

describe("the feed to poll across two instances on postgres", () => {
  let first: TestServer;
  let second: TestServer;
  const open: TestSubscription[] = [];

  beforeAll(async () => {
    first = await startTestServer("postgres", { env: SIGNALS_ONLY });
    second = await startInstanceOn(first, { env: SIGNALS_ONLY });
  });

  afterEach(async () => {
    await Promise.all(open.splice(0).map((subscription) => subscription.dispose()));
  });

  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  it("answers a poll waiting on one instance when an event commits through the other", async () => {
    const reference = await createReference(first);
    const { cursor } = await pollToEnd(first, { referenceId: reference });
    const answer = poll(first, { referenceId: reference }, { after: cursor, wait: 30 });
    await eventually(
      () => first.app.services.eventFeed.waitingPolls === 1,
      30_000,
      () => "the poll to wait",
    );
    await recordExtraction(second, reference);
    const page = await answer;
    expectStatus(page, 200);
    expect(page.body.data.map((event) => event.type)).toEqual(["extraction_succeeded"]);
  });

  it("gives a long-polling follower on one instance what a subscription on the other gets, writes through both", async () => {
    const references = [await createReference(first), await createReference(second), await createReference(first)];
    const filter: FeedFilter = { types: ["extraction_succeeded"] };
    const { cursor } = await pollToEnd(second, filter);
    const subscription = subscribeLikeFeed(second, filter, cursor);
    open.push(subscription);
    await waitForOpenSubscriptions(second, 1);
    const writes = 3 * 2 * 5;
    const following = follow(first, filter, cursor, writes);
    await Promise.all(
      references.flatMap((reference) =>
        [first, second].map(async (through) => {
          for (let i = 0; i < 5; i++) await recordExtraction(through, reference);
        }),
      ),
    );
    const followed = await following;
    expect(followed).toHaveLength(writes);
    await subscription.waitFor(writes);
    expect(subscriptionIds(subscription)).toEqual(followed);
    // Nothing more: the follower's last cursor is at the end.
    const rest = await pollToEnd(second, filter, cursor);
    expect(rest.ids).toEqual(followed);
  });
});
