import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import {
  feedQuery,
  poll,
  pollToEnd,
  subscribeLikeFeed,
  subscriptionIds,
  type FeedFilter,
  type FeedPage,
} from "./support/event-feed.ts";
import { newId } from "../src/domain/shared/ids.ts";
import { gql, gqlData } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { eventually, waitForOpenSubscriptions, type TestSubscription } from "./support/subscription-client.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * The feed to poll, GET /v1/events and Query.lifecycleEvents: a poller that follows next_cursor sees exactly what
 * a graphql-ws subscription with the same filters sees, in the same order (writes in parallel, so that commit
 * order and occurred_at order may differ); the cursors of the two are interchangeable; a long poll answers when a
 * matching event commits, ends empty with a cursor that misses nothing, frees its place when its client leaves,
 * and is bounded per organization; bad input is refused precisely.
 */

type Server = Pick<TestServer, "url" | "apiKey">;

describe.each(DATABASE_KINDS)("the feed to poll on %s", (kind) => {
  let server: TestServer;
  const open: TestSubscription[] = [];
  let bookings = 0;

  beforeAll(async () => {
    server = await startTestServer(kind);
  });

  afterEach(async () => {
    await Promise.all(open.splice(0).map((subscription) => subscription.dispose()));
  });

  afterAll(async () => {
    await server?.close();
  });

  async function createReference(tags: string[] = [], on: Server = server): Promise<{ id: string; tagIds: string[] }> {
    const created = await http(on, "POST", "/v1/references", {
      body: {
        booking_number: `BK-FEED-${kind}-${++bookings}`,
        carrier_code: "MAEU",
        tags: tags.map((name) => ({ name })),
      },
    });
    expectStatus(created, 201);
    const reference = created.body.reference as { id: string; tags: { id: string; name: string }[] };
    return { id: reference.id, tagIds: reference.tags.map((tag) => tag.id) };
  }

  async function recordExtraction(referenceId: string, on: Server = server): Promise<void> {
    expectStatus(
      await http(on, "POST", `/v1/references/${referenceId}/extractions`, { body: { status: "succeeded" } }),
      201,
    );
  }

  async function recordArrival(referenceId: string, day: number, on: Server = server): Promise<void> {
    const estimated_arrival = `2027-01-${String(day).padStart(2, "0")}T00:00:00.000Z`;
    expectStatus(await http(on, "POST", `/v1/references/${referenceId}/updates`, { body: { estimated_arrival } }), 201);
  }

  const waitingPolls = (on: TestServer = server) => on.app.services.eventFeed.waitingPolls;

  it("gives a poller following next_cursor exactly what a subscription with the same filters gets, in order", async () => {
    const { organizationId, apiKey } = await server.newOrganization("feed-follow");
    const org = { url: server.url, apiKey };
    const [red, both, plain] = [
      await createReference(["red"], org),
      await createReference(["Red", "blue"], org),
      await createReference([], org),
    ];
    const [redId, blueId] =
      both.tagIds.length === 2 ? [red.tagIds[0]!, both.tagIds.find((id) => id !== red.tagIds[0])!] : [];
    expect(redId).toBeDefined();
    const filters: FeedFilter[] = [
      {},
      { tagNames: ["RED"] },
      { excludeTagNames: ["blue"] },
      { tagIds: [redId!], excludeTagIds: [blueId!] },
      { referenceId: both.id, types: ["extraction_succeeded", "estimated_arrival_changed"] },
      { types: ["reference_update_created"] },
      { tagNames: ["no such tag"] },
    ];
    // The three references' creations are before the start: a poller from nothing reads them, then its cursor.
    const start = await pollToEnd(org, {});
    expect(start.ids).toHaveLength(3);
    const subscriptions = filters.map((filter) => subscribeLikeFeed(org, filter, start.cursor));
    open.push(...subscriptions);
    await waitForOpenSubscriptions(server, subscriptions.length);

    // Writes in parallel, on every reference: transactions interleave.
    await Promise.all(
      [red, both, plain].map(async (reference, index) => {
        for (let i = 0; i < 6; i++) {
          if (i % 2 === 0) await recordExtraction(reference.id, org);
          else await recordArrival(reference.id, index * 10 + i, org);
        }
      }),
    );

    for (const [index, filter] of filters.entries()) {
      const polled = await pollToEnd(org, filter, start.cursor, 4);
      const subscription = subscriptions[index]!;
      await eventually(
        () => subscription.data.length >= polled.ids.length,
        30_000,
        () => `the subscription with ${JSON.stringify(filter)} to get ${polled.ids.length} events`,
      );
      expect({ filter, ids: subscriptionIds(subscription) }).toEqual({ filter, ids: polled.ids });
      expect(subscription.errors).toEqual([]);
    }
    const all = await pollToEnd(org, {}, start.cursor);
    expect(all.ids).toHaveLength(3 * 3 + 3 * 3 * 2);
    expect(new Set(all.ids).size).toBe(all.ids.length);
    // Nothing of another organization.
    const mine = await pollToEnd(server, {});
    expect(mine.ids.filter((id) => all.ids.includes(id))).toEqual([]);
    expect(organizationId).not.toBe(server.organizationId);
  });

  it("shares cursors with the subscription both ways, and pages the same over GraphQL", async () => {
    const { apiKey } = await server.newOrganization("feed-cursors");
    const org = { url: server.url, apiKey };
    const reference = await createReference(["x"], org);
    for (let i = 0; i < 4; i++) await recordExtraction(reference.id, org);
    const rest = await pollToEnd(org, {}, undefined, 2);
    expect(rest.ids).toHaveLength(5);

    // GraphQL: first/after over nextCursor gives the same events in the same order.
    const graphqlIds: string[] = [];
    let after: string | null = null;
    for (;;) {
      const page: any = await gqlData(
        org,
        `query ($after: String) { lifecycleEvents(first: 2, after: $after) {
          edges { cursor node { id } } pageInfo { hasNextPage endCursor } nextCursor } }`,
        { after },
      );
      const connection = page.lifecycleEvents;
      graphqlIds.push(...connection.edges.map((edge: any) => edge.node.id));
      after = connection.nextCursor;
      if (connection.edges.length === 0 && !connection.pageInfo.hasNextPage) break;
    }
    expect(graphqlIds).toEqual(rest.ids);

    // A subscription message's cursor resumes the feed, and the feed's cursor resumes a subscription.
    const subscription = subscribeLikeFeed(org, {}, rest.cursor);
    open.push(subscription);
    await waitForOpenSubscriptions(server, 1);
    await recordExtraction(reference.id, org);
    await recordExtraction(reference.id, org);
    await subscription.waitFor(2);
    const fromMessage = await poll(org, {}, { after: subscription.data[0]!.lifecycleEvents.cursor });
    expectStatus(fromMessage, 200);
    expect(fromMessage.body.data.map((event) => event.id)).toEqual([subscriptionIds(subscription)[1]]);
    // A reference's events listing cursor names an event: the feed continues after it.
    const listing = await http(org, "GET", `/v1/references/${reference.id}/events?limit=1`);
    const fromListing = await pollToEnd(org, {}, listing.body.next_cursor);
    expect(fromListing.ids).toEqual([...rest.ids.slice(1), ...subscriptionIds(subscription)]);
  });

  it("answers a waiting poll when a matching event commits, and not for others", async () => {
    const { apiKey } = await server.newOrganization("feed-long-poll");
    const org = { url: server.url, apiKey };
    const watched = await createReference([], org);
    const other = await createReference([], org);
    const { cursor } = await pollToEnd(org, { referenceId: watched.id });
    const answer = poll(org, { referenceId: watched.id, types: ["extraction_succeeded"] }, { after: cursor, wait: 30 });
    await eventually(
      () => waitingPolls() === 1,
      30_000,
      () => "the poll to wait",
    );
    // Events that do not match (another reference; another type) leave it waiting.
    await recordExtraction(other.id, org);
    await recordArrival(watched.id, 3, org);
    await recordExtraction(watched.id, org);
    const page = await answer;
    expectStatus(page, 200);
    expect(page.body.data.map((event) => [event.type, event.reference_id])).toEqual([
      ["extraction_succeeded", watched.id],
    ]);
    expect(waitingPolls()).toBe(0);
    // Its cursor misses nothing that follows.
    await recordExtraction(watched.id, org);
    const next = await poll(org, { referenceId: watched.id }, { after: page.body.next_cursor });
    expect(next.body.data.map((event) => event.type)).toEqual(["extraction_succeeded"]);
  });

  it("ends a wait with nothing as an empty page whose cursor misses nothing, also on an empty log", async () => {
    const { apiKey } = await server.newOrganization("feed-empty");
    const org = { url: server.url, apiKey };
    const empty = await poll(org, {}, { wait: 1 });
    expectStatus(empty, 200);
    expect(empty.body).toEqual({ data: [], next_cursor: expect.any(String), has_more: false });
    const reference = await createReference([], org);
    const after = await poll(org, {}, { after: empty.body.next_cursor });
    expect(after.body.data.map((event) => [event.type, event.reference_id])).toEqual([
      ["reference_created", reference.id],
    ]);
    // A wait that ends empty answers with the cursor it was given (or one further on): the next poll reads on.
    const again = await poll(org, {}, { after: after.body.next_cursor, wait: 1 });
    expect(again.body.data).toEqual([]);
    await recordExtraction(reference.id, org);
    const last = await poll(org, {}, { after: again.body.next_cursor });
    expect(last.body.data.map((event) => event.type)).toEqual(["extraction_succeeded"]);
  });

  it("costs no statement while polls wait: they take none of the live feed's safety-net reads", async () => {
    let statements = 0;
    // The live feed reads every 10 ms while a subscription listens; the webhook worker's polls are off.
    const instance = await startInstanceOn(server, {
      onQuery: () => statements++,
      env: { SUBSCRIPTION_POLL_INTERVAL: "10ms", WEBHOOK_WORKER: "off" },
    });
    try {
      const { apiKey } = await instance.newOrganization("feed-idle");
      const org = { url: instance.url, apiKey };
      const { cursor } = await pollToEnd(org, {});
      const polls = Array.from({ length: 20 }, () => poll(org, {}, { after: cursor, wait: 1 }));
      await eventually(
        () => waitingPolls(instance) === 20,
        30_000,
        () => "20 polls to wait",
      );
      const before = statements;
      const pages = await Promise.all(polls);
      expect(statements - before).toBe(0);
      for (const page of pages) expect([page.status, page.body.data, page.body.next_cursor]).toEqual([200, [], cursor]);
    } finally {
      await instance.close();
    }
  });

  it("frees a waiting poll's place when its client goes away", async () => {
    const { apiKey } = await server.newOrganization("feed-gone");
    const controller = new AbortController();
    const request = fetch(`${server.url}/v1/events?${feedQuery({}, { wait: 30 })}`, {
      headers: { "x-api-key": apiKey },
      signal: controller.signal,
    }).catch((error: unknown) => error);
    await eventually(
      () => waitingPolls() === 1,
      30_000,
      () => "the poll to wait",
    );
    controller.abort();
    await request;
    await eventually(
      () => waitingPolls() === 0,
      30_000,
      () => "the waiting poll to be dropped",
    );
  });

  it("bounds the waiting polls of one organization with 429 and Retry-After, not another's", async () => {
    const bounded = await startInstanceOn(server, { env: { FEED_MAX_WAITING_POLLS_PER_ORGANIZATION: "2" } });
    let closed = false;
    try {
      const first = await bounded.newOrganization("feed-bound");
      const second = await bounded.newOrganization("feed-bound-other");
      const org = { url: bounded.url, apiKey: first.apiKey };
      const waiting = [poll(org, {}, { wait: 30 }), poll(org, {}, { wait: 30 })];
      await eventually(
        () => waitingPolls(bounded) === 2,
        30_000,
        () => "two polls to wait",
      );
      const refused = await poll(org, {}, { wait: 30 });
      expectStatus(refused, 429);
      expect(refused.headers.get("retry-after")).toBe("1");
      expect(refused.body).toMatchObject({ code: "TOO_MANY_WAITING_POLLS", limit: 2 });
      // Without wait a poll is never refused; another organization still waits.
      expectStatus(await poll(org, {}), 200);
      const elsewhere = poll({ url: bounded.url, apiKey: second.apiKey }, {}, { wait: 30 });
      await eventually(
        () => waitingPolls(bounded) === 3,
        30_000,
        () => "the other organization's poll to wait",
      );
      // Shutdown answers every waiting poll at once, with an empty page.
      closed = true;
      await bounded.close();
      for (const answer of [...waiting, elsewhere]) {
        const page = await answer;
        expectStatus(page, 200);
        expect((page.body as FeedPage).data).toEqual([]);
      }
    } finally {
      if (!closed) await bounded.close();
    }
  });

  it("never returns an event past retention, and reads on past it", async () => {
    const { organizationId, apiKey } = await server.newOrganization("feed-retention");
    const org = { url: server.url, apiKey };
    const reference = await createReference([], org);
    // Written as another process would, with an occurred_at 18 months and more ago: in the live order, not shown.
    const old = newId();
    const occurredAt = new Date("2020-01-01T00:00:00.000Z");
    // PostgreSQL's log is partitioned by month: a writer from outside makes the month first (migration 0016).
    if (kind === "postgres")
      await server.database.prisma.$queryRawUnsafe(
        `SELECT "lifecycle_events_ensure_month"($1::timestamp(3))`,
        occurredAt.toISOString(),
      );
    await server.database.prisma.lifecycleEvent.create({
      data: {
        id: old,
        organizationId,
        referenceId: reference.id,
        type: "extraction_succeeded",
        occurredAt,
        detail: { reference_id: reference.id, organization_id: organizationId, status: "succeeded" },
        referenceTags: [],
      },
    });
    await recordExtraction(reference.id, org);
    const polled = await pollToEnd(org, {}, undefined, 1);
    expect(polled.ids).toHaveLength(2);
    expect(polled.ids).not.toContain(old);
  });

  it("refuses bad input with the parameter at fault", async () => {
    const cases: [string, number, string, string][] = [
      ["limit=0", 400, "INVALID_LIMIT", "limit"],
      ["limit=501", 400, "INVALID_LIMIT", "limit"],
      ["wait=31", 400, "INVALID_QUERY_PARAMETER", "wait"],
      ["wait=-1", 400, "INVALID_QUERY_PARAMETER", "wait"],
      ["wait=1.5", 400, "INVALID_QUERY_PARAMETER", "wait"],
      ["type=nope", 400, "INVALID_EVENT_TYPE", "type"],
      ["type=extraction_succeeded,,", 400, "INVALID_EVENT_TYPE", "type"],
      ["tag_ids=not-a-uuid", 400, "INVALID_QUERY_PARAMETER", "tag_ids"],
      ["exclude_tag_ids=x", 400, "INVALID_QUERY_PARAMETER", "exclude_tag_ids"],
      ["after=garbage", 400, "INVALID_CURSOR", "after"],
    ];
    for (const [query, status, code, pointer] of cases) {
      const refused = await http(server, "GET", `/v1/events?${query}`);
      expect({
        query,
        status: refused.status,
        code: refused.body.code,
        pointer: refused.body.errors?.[0]?.pointer,
      }).toEqual({ query, status, code, pointer });
      expect(refused.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    }
    const tooMany = new URLSearchParams(
      Array.from({ length: 101 }, (_, i): [string, string] => ["tag_names", `t${i}`]),
    ).toString();
    const refused = await http(server, "GET", `/v1/events?${tooMany}`);
    expect([refused.status, refused.body.code, refused.body.errors[0].pointer]).toEqual([
      400,
      "INVALID_QUERY_PARAMETER",
      "tag_names",
    ]);
    const unknown = await http(server, "GET", `/v1/events?reference_id=0190f3a4-0000-7000-8000-000000000000`);
    expect([unknown.status, unknown.body.code]).toEqual([404, "NOT_FOUND"]);

    const graphql = async (args: string) =>
      (await gql(server, `{ lifecycleEvents(${args}) { nextCursor } }`)).body.errors?.[0]?.extensions;
    expect(await graphql("first: 0")).toMatchObject({ code: "BAD_USER_INPUT", field: "first" });
    expect(await graphql('after: "garbage"')).toMatchObject({ code: "INVALID_CURSOR", field: "after" });
    expect(await graphql('filter: { tagIds: ["x"] }')).toMatchObject({
      code: "BAD_USER_INPUT",
      field: "filter.tagIds.0",
    });
  });
});
