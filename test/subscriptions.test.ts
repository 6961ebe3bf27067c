import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { gql, gqlData } from "./support/graphql-client.ts";
import {
  eventually,
  metricValue,
  subscribe,
  waitForOpenSubscriptions,
  type TestSubscription,
} from "./support/subscription-client.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Subscription.lifecycleEvents over graphql-ws, with a real graphql-ws client against a real
 * server: filters, organization isolation, authentication and close codes, resume with no gap and no duplicate
 * while writes continue, reconnecting with the last cursor, the same limits and error codes as over HTTP, and
 * shutdown. Short settle delay and poll interval keep it fast; nothing sleeps longer than that.
 */

const ENV = {
  SUBSCRIPTION_POLL_INTERVAL: "100ms",
  SUBSCRIPTION_AUTH_RECHECK_INTERVAL: "100ms",
};

const EVENTS = `
  subscription Events($referenceId: ID, $tagIds: [ID!], $types: [LifecycleEventType!], $after: String) {
    lifecycleEvents(referenceId: $referenceId, tagIds: $tagIds, types: $types, after: $after) {
      cursor
      node { id type occurredAt referenceId referenceTags { id name } }
    }
  }`;

interface EventMessage {
  lifecycleEvents: { cursor: string; node: { id: string; type: string; occurredAt: string; referenceId: string } };
}

const idsOf = (subscription: TestSubscription<EventMessage>) =>
  subscription.data.map((message) => message.lifecycleEvents.node.id);

describe.each(DATABASE_KINDS)("live subscriptions on %s", (kind) => {
  let server: TestServer;
  const open: TestSubscription[] = [];
  let bookings = 0;

  const watch = (
    variables: Record<string, unknown> = {},
    options: Parameters<typeof subscribe>[3] = {},
    on: TestServer = server,
  ) => {
    const subscription = subscribe<EventMessage>(on, EVENTS, variables, options);
    open.push(subscription);
    return subscription;
  };

  async function createReference(
    tags: string[] = [],
    on: Pick<TestServer, "url" | "apiKey"> = server,
  ): Promise<string> {
    const data = await gqlData(
      on,
      `mutation ($input: CreateReferenceInput!) { createReference(input: $input) { reference { id } } }`,
      {
        input: { bookingNumber: `BK-${kind}-${++bookings}`, carrierCode: "MAEU", tags: tags.map((name) => ({ name })) },
      },
    );
    return data.createReference.reference.id;
  }

  async function recordExtraction(
    referenceId: string,
    failed = false,
    on: Pick<TestServer, "url" | "apiKey"> = server,
  ): Promise<void> {
    await gqlData(
      on,
      `mutation ($input: RecordExtractionInput!) { recordExtraction(input: $input) { reference { id } } }`,
      {
        input: {
          referenceId,
          status: failed ? "FAILED" : "SUCCEEDED",
          ...(failed && { error: { code: "TIMEOUT", message: "slow" } }),
        },
      },
    );
  }

  /** The reference's log as `Reference.events` returns it: ids and cursors in order. */
  async function logOf(referenceId: string): Promise<{ id: string; cursor: string; type: string }[]> {
    const data = await gqlData(
      server,
      `query ($id: ID!) { reference(id: $id) { events(first: 500) { edges { cursor node { id type } } } } }`,
      { id: referenceId },
    );
    return data.reference.events.edges.map((edge: { cursor: string; node: { id: string; type: string } }) => ({
      id: edge.node.id,
      cursor: edge.cursor,
      type: edge.node.type,
    }));
  }

  beforeAll(async () => {
    server = await startTestServer(kind, { env: ENV });
  });

  afterEach(async () => {
    await Promise.all(open.splice(0).map((subscription) => subscription.dispose()));
    // The next test counts its own open subscriptions.
    await eventually(async () => (await metricValue(server, "reftrail_subscriptions_open")) === 0);
  });

  afterAll(async () => {
    await server?.close();
  });

  it("delivers committed events live, filtered by reference and by type, in log order", async () => {
    const a = await createReference();
    const b = await createReference();
    const byReference = watch({ referenceId: a });
    const byType = watch({ types: ["EXTRACTION_FAILED"] });
    const everything = watch({ types: [] });
    await waitForOpenSubscriptions(server, 3);

    await recordExtraction(a);
    await recordExtraction(b, true);
    await recordExtraction(a, true);
    // A write that fails commits nothing, so it produces no event.
    const failed = await gql(
      server,
      `mutation { recordExtraction(input: { referenceId: "${a}", status: FAILED }) { reference { id } } }`,
    );
    expect(failed.body.errors?.length).toBeGreaterThan(0);

    await everything.waitFor(3);
    await byReference.waitFor(2);
    await byType.waitFor(2);
    const logA = await logOf(a);
    const logB = await logOf(b);
    expect(idsOf(byReference)).toEqual(logA.slice(1).map((event) => event.id));
    expect(byType.data.map((m) => [m.lifecycleEvents.node.referenceId, m.lifecycleEvents.node.type])).toEqual([
      [b, "EXTRACTION_FAILED"],
      [a, "EXTRACTION_FAILED"],
    ]);
    expect(idsOf(everything)).toEqual([logA[1]!.id, logB[1]!.id, logA[2]!.id]);
    const times = everything.data.map((m) => m.lifecycleEvents.node.occurredAt);
    expect([...times].sort()).toEqual(times);
  });

  it("filters by tag with the tags the reference carried when each event was written", async () => {
    const tagged = await createReference(["Reefer"]);
    const untagged = await createReference();
    const reefer = (await gqlData(server, `{ tags(filter: { namePrefix: "reefer" }) { edges { node { id } } } }`)).tags
      .edges[0].node.id;
    const byTag = watch({ tagIds: [reefer, "01900000-0000-7000-8000-000000000000"] });
    await waitForOpenSubscriptions(server, 1);

    await recordExtraction(tagged);
    await recordExtraction(untagged);
    await gqlData(
      server,
      `mutation ($input: AddTagsToReferenceInput!) { addTagsToReference(input: $input) { reference { id } } }`,
      {
        input: { referenceId: untagged, tags: [{ id: reefer }] },
      },
    );
    await gqlData(
      server,
      `mutation ($input: RemoveTagFromReferenceInput!) { removeTagFromReference(input: $input) { reference { id } } }`,
      {
        input: { referenceId: tagged, tagId: reefer },
      },
    );
    await recordExtraction(untagged, true);
    await recordExtraction(tagged, true);
    const marker = await createReference(["Reefer"]);

    await byTag.waitFor(3);
    expect(byTag.data.map((m) => [m.lifecycleEvents.node.referenceId, m.lifecycleEvents.node.type])).toEqual([
      [tagged, "EXTRACTION_SUCCEEDED"],
      [untagged, "EXTRACTION_FAILED"],
      [marker, "REFERENCE_CREATED"],
    ]);
  });

  it("keeps each organization's events to itself", async () => {
    const other = await server.newOrganization("other");
    const otherServer = { url: server.url, apiKey: other.apiKey };
    const mine = await createReference();
    const theirs = watch({}, { connectionParams: { "x-api-key": other.apiKey } });
    const probing = watch({ referenceId: mine }, { connectionParams: { "x-api-key": other.apiKey } });
    await probing.ended;
    expect(probing.errors.map((error) => error.extensions?.code)).toEqual(["NOT_FOUND"]);
    await waitForOpenSubscriptions(server, 1);

    await recordExtraction(mine);
    await recordExtraction(mine, true);
    const theirReference = await createReference([], otherServer);
    await theirs.waitFor(1);
    // Their own event came after ours were committed: had ours leaked, they would have arrived first.
    await eventually(async () => (await logOf(mine)).length === 3);
    expect(theirs.data.map((m) => m.lifecycleEvents.node.referenceId)).toEqual([theirReference]);
  });

  it("replays after a cursor, then continues live, with no gap and no duplicate while writes continue", async () => {
    const reference = await createReference();
    for (let i = 0; i < 9; i++) await recordExtraction(reference, i % 3 === 0);
    const before = await logOf(reference);
    expect(before).toHaveLength(10);
    const resumeAfter = before[4]!;

    // Writes keep coming while the subscription replays and joins the live feed.
    let writing = true;
    let written = 0;
    const writer = (async () => {
      while (writing && written < 40) {
        await recordExtraction(reference, written % 4 === 0);
        written++;
      }
    })();
    await eventually(() => written >= 5);
    const resumed = watch({ referenceId: reference, after: resumeAfter.cursor });
    await eventually(() => written >= 15);
    writing = false;
    await writer;

    const log = await logOf(reference);
    const expected = log.slice(5).map((event) => event.id);
    await resumed.waitFor(expected.length);
    expect(idsOf(resumed)).toEqual(expected);
    expect(resumed.errors).toEqual([]);
  });

  it("resumes from the last message's cursor after a disconnect, on a new connection", async () => {
    const reference = await createReference();
    const first = watch({ referenceId: reference });
    await waitForOpenSubscriptions(server, 1);
    for (let i = 0; i < 3; i++) await recordExtraction(reference);
    await first.waitFor(3);
    await first.dispose();
    const lastCursor = first.data.at(-1)!.lifecycleEvents.cursor;

    // Written while no one listens...
    for (let i = 0; i < 3; i++) await recordExtraction(reference, true);
    const second = watch({ referenceId: reference, after: lastCursor });
    // ...and after reconnecting.
    for (let i = 0; i < 2; i++) await recordExtraction(reference);
    await second.waitFor(5);

    const log = await logOf(reference);
    expect([...idsOf(first), ...idsOf(second)]).toEqual(log.slice(1).map((event) => event.id));
    // A cursor from a message resumes whatever the filters of the new subscription.
    const anyFilter = watch({ after: first.data[0]!.lifecycleEvents.cursor, types: ["EXTRACTION_SUCCEEDED"] });
    await anyFilter.waitFor(4);
    expect(idsOf(anyFilter).slice(0, 4)).toEqual(
      log
        .filter((e) => e.type === "EXTRACTION_SUCCEEDED")
        .slice(1)
        .map((e) => e.id),
    );
  });

  it("authenticates with x-api-key or a Bearer token in connectionParams, or with GraphiQL's per-operation headers", async () => {
    const reference = await createReference();
    const log = await logOf(reference);
    const bearer = watch(
      { referenceId: reference, after: log[0]!.cursor },
      { connectionParams: { Authorization: `Bearer ${server.apiKey}` } },
    );
    const graphiql = watch(
      { referenceId: reference, after: log[0]!.cursor },
      { connectionParams: {}, extensions: { headers: { "X-API-Key": server.apiKey } } },
    );
    await recordExtraction(reference);
    await bearer.waitFor(1);
    await graphiql.waitFor(1);
    expect(idsOf(bearer)).toEqual(idsOf(graphiql));
  });

  it("closes the connection with 4401 for a missing, unknown or revoked key, and 4403 for another organization's", async () => {
    const missing = watch({}, { connectionParams: {} });
    expect((await missing.waitForClose()).code).toBe(4401);
    const unknown = watch({}, { connectionParams: { "x-api-key": "rt_not-a-key" } });
    expect(await unknown.waitForClose()).toMatchObject({
      code: 4401,
      reason: expect.stringMatching(/invalid or revoked/),
    });
    const badBearer = watch({}, { connectionParams: { authorization: "Bearer rt_nope" } });
    expect((await badBearer.waitForClose()).code).toBe(4401);
    // An expired key is told so, as over HTTP.
    const expiring = await server.app.services.organizations.createApiKey(server.organizationId, {
      expiresAt: new Date(Date.now() + 300),
    });
    await new Promise((resolve) => setTimeout(resolve, 400));
    const expired = watch({}, { connectionParams: { "x-api-key": expiring.key } });
    expect(await expired.waitForClose()).toMatchObject({ code: 4401, reason: expect.stringMatching(/expired/) });

    const other = await server.newOrganization("another");
    const mixed = watch({}, { extensions: { headers: { "x-api-key": other.apiKey } } });
    expect((await mixed.waitForClose()).code).toBe(4403);

    // Revoked: refused on a new connection, and an open connection is closed.
    const key = await server.app.services.organizations.createApiKey(server.organizationId);
    const connected = watch({}, { connectionParams: { "x-api-key": key.key } });
    await waitForOpenSubscriptions(server, 1);
    await server.app.services.organizations.revokeApiKey(key.id);
    expect(await connected.waitForClose()).toMatchObject({ code: 4401, reason: expect.stringMatching(/revoked/) });
    const refused = watch({}, { connectionParams: { "x-api-key": key.key } });
    expect((await refused.waitForClose()).code).toBe(4401);
  });

  it("applies the same validation, depth and cost limits and error codes as GraphQL over HTTP", async () => {
    const errorsOf = async (query: string, variables: Record<string, unknown> = {}) => {
      const subscription = subscribe(server, query, variables);
      open.push(subscription);
      await subscription.ended;
      return subscription.errors;
    };
    expect((await errorsOf("subscription { lifecycleEvents { "))[0]?.extensions?.code).toBe("GRAPHQL_PARSE_FAILED");
    expect((await errorsOf("subscription { lifecycleEvents { nope } }"))[0]?.extensions?.code).toBe(
      "GRAPHQL_VALIDATION_FAILED",
    );
    const deep = `subscription { lifecycleEvents { node { reference { ${"parent { ".repeat(12)}id${" }".repeat(12)} } } } }`;
    expect((await errorsOf(deep))[0]?.extensions).toMatchObject({
      code: "GRAPHQL_VALIDATION_FAILED",
      limit: { kind: "depth" },
    });
    const aliased = `subscription { lifecycleEvents { node { ${Array.from({ length: 31 }, (_, i) => `a${i}: id`).join(" ")} } } }`;
    expect((await errorsOf(aliased))[0]?.extensions).toMatchObject({
      code: "GRAPHQL_VALIDATION_FAILED",
      limit: { kind: "aliases", maximum: 30, actual: 31 },
    });
    const long = `subscription { lifecycleEvents { node { ${"id ".repeat(10_000)} } } }`;
    expect((await errorsOf(long))[0]).toMatchObject({
      message: expect.stringMatching(/Document contains more th[ae]t? 10000 tokens/),
      extensions: { code: "GRAPHQL_PARSE_FAILED" },
    });
    const costly = `subscription { lifecycleEvents { node { reference { events(first: 500) { edges { node { reference { events(first: 500) { edges { node { id } } } } } } } } } } }`;
    expect((await errorsOf(costly))[0]?.extensions).toMatchObject({
      code: "GRAPHQL_VALIDATION_FAILED",
      limit: { kind: "cost" },
    });
    expect((await errorsOf(EVENTS, { types: ["NOT_A_TYPE"] }))[0]?.extensions?.code).toBe("BAD_USER_INPUT");
    expect((await errorsOf(EVENTS, { after: "not-a-cursor" }))[0]?.extensions).toMatchObject({
      code: "INVALID_CURSOR",
      field: "after",
    });
    expect((await errorsOf(EVENTS, { tagIds: ["nope"] }))[0]?.extensions).toMatchObject({
      code: "BAD_USER_INPUT",
      field: "tagIds.0",
    });
    expect((await errorsOf(EVENTS, { referenceId: "01900000-0000-7000-8000-000000000000" }))[0]?.extensions?.code).toBe(
      "NOT_FOUND",
    );

    // Over HTTP, a subscription is refused with a clear error rather than a masked one.
    const overHttp = await gql(server, "subscription { lifecycleEvents { cursor } }");
    expect(overHttp.body.errors?.[0]?.extensions?.code).toBe("BAD_REQUEST");
  });

  it("closes sockets with 1001 on shutdown, with the close handshake completed", async () => {
    const own = await startTestServer(kind, { env: ENV });
    let closed = false;
    try {
      const subscription = subscribe(own, EVENTS);
      await waitForOpenSubscriptions(own, 1);
      await own.close();
      closed = true;
      // A socket that had not completed the handshake would have been dropped (1006), not closed with 1001.
      expect((await subscription.waitForClose()).code).toBe(1001);
      await subscription.dispose();
    } finally {
      if (!closed) await own.close();
    }
  });
});
