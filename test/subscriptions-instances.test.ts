import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import type { LifecycleEvent } from "../src/domain/lifecycle/lifecycle-event.ts";
import { newId } from "../src/domain/shared/ids.ts";
import { gqlData } from "./support/graphql-client.ts";
import { liveOrderIds } from "./support/live-order.ts";
import {
  eventually,
  metricValue,
  subscribe,
  waitForOpenSubscriptions,
  type TestSubscription,
} from "./support/subscription-client.ts";
import { startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Subscription clients on any instance see events written through any instance. On PostgreSQL
 * the database itself NOTIFYs every instance when a transaction that wrote events commits, whatever process wrote
 * them (the receiving instances here poll only once an hour, so a delivery within a test's deadline proves the
 * signal works). On SQLite, processes sharing one file rely on the periodic read of the log alone.
 */

const FAST = { SUBSCRIPTION_POLL_INTERVAL: "100ms" };
/** Polls far apart: within a test's deadline, only a commit signal can bring an event. */
const SIGNALS_ONLY = { SUBSCRIPTION_POLL_INTERVAL: "1h" };

const EVENTS = `subscription ($referenceId: ID, $after: String) {
  lifecycleEvents(referenceId: $referenceId, after: $after) { cursor node { id type referenceId } }
}`;

interface EventMessage {
  lifecycleEvents: { cursor: string; node: { id: string; type: string; referenceId: string } };
}

const idsOf = (subscription: TestSubscription<EventMessage>) =>
  subscription.data.map((message) => message.lifecycleEvents.node.id);

async function createReference(server: TestServer, number: string): Promise<string> {
  const data = await gqlData(
    server,
    `mutation ($input: CreateReferenceInput!) { createReference(input: $input) { reference { id } } }`,
    {
      input: { bookingNumber: number, carrierCode: "CMDU" },
    },
  );
  return data.createReference.reference.id;
}

async function recordExtraction(server: TestServer, referenceId: string): Promise<void> {
  await gqlData(
    server,
    `mutation ($id: ID!) { recordExtraction(input: { referenceId: $id, status: SUCCEEDED }) { reference { id } } }`,
    {
      id: referenceId,
    },
  );
}

async function logIds(server: TestServer, referenceId: string): Promise<string[]> {
  const data = await gqlData(
    server,
    `query ($id: ID!) { reference(id: $id) { events(first: 500) { edges { node { id } } } } }`,
    {
      id: referenceId,
    },
  );
  return data.reference.events.edges.map((edge: { node: { id: string } }) => edge.node.id);
}

/** Appends an event straight to the log, as another process would: the app publishes no commit signal. */
async function insertEventDirectly(
  server: TestServer,
  referenceId: string,
  occurredAt = new Date(),
): Promise<LifecycleEvent> {
  const event = {
    id: newId(),
    organizationId: server.organizationId,
    referenceId,
    type: "extraction_succeeded",
    occurredAt,
    detail: { reference_id: referenceId, organization_id: server.organizationId, status: "succeeded" },
    referenceTags: [],
  } as const;
  await server.database.prisma.lifecycleEvent.create({ data: { ...event, referenceTags: [] } });
  return event as LifecycleEvent;
}

describe("subscriptions across two instances on postgres", () => {
  let first: TestServer;
  let second: TestServer;
  const open: TestSubscription[] = [];
  const watch = (on: TestServer, variables: Record<string, unknown>) => {
    const subscription = subscribe<EventMessage>(on, EVENTS, variables);
    open.push(subscription);
    return subscription;
  };

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

  it("delivers events written through one instance to a client of the other, woken by NOTIFY", async () => {
    const reference = await createReference(first, "BK-TWO-1");
    const onSecond = watch(second, { referenceId: reference });
    const onFirst = watch(first, { referenceId: reference });
    await waitForOpenSubscriptions(second, 1);
    await waitForOpenSubscriptions(first, 1);

    for (let i = 0; i < 3; i++) await recordExtraction(first, reference);
    for (let i = 0; i < 2; i++) await recordExtraction(second, reference);
    // Both instances poll once an hour: only a signal brings the events within the deadline.
    await onSecond.waitFor(5, 40_000);
    await onFirst.waitFor(5, 40_000);
    const log = (await logIds(first, reference)).slice(1);
    expect(idsOf(onSecond)).toEqual(log);
    expect(idsOf(onFirst)).toEqual(log);
  });

  it("loses no event when the LISTEN connections drop: each instance reconnects and reads at once", async () => {
    const reference = await createReference(first, "BK-TWO-LISTEN");
    const onFirst = watch(first, { referenceId: reference });
    const onSecond = watch(second, { referenceId: reference });
    await waitForOpenSubscriptions(first, 1);
    await waitForOpenSubscriptions(second, 1);
    // Both instances poll once a minute: only signals (or a reconnect's read) bring events sooner.
    const dropped = await first.database.prisma.$queryRaw<{ pid: number }[]>`
      SELECT pg_terminate_backend(pid) AS "pid" FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = 'reftrail-lifecycle-signals'`;
    expect(dropped).toHaveLength(2);
    for (let i = 0; i < 2; i++) await recordExtraction(first, reference);
    await recordExtraction(second, reference);
    await onFirst.waitFor(3, 20_000);
    await onSecond.waitFor(3, 20_000);
    const log = (await logIds(first, reference)).slice(1);
    expect(idsOf(onFirst)).toEqual(log);
    expect(idsOf(onSecond)).toEqual(log);
  });

  it("resumes on the other instance with the last cursor received", async () => {
    const reference = await createReference(first, "BK-TWO-2");
    const before = watch(first, { referenceId: reference });
    await waitForOpenSubscriptions(first, 1);
    for (let i = 0; i < 3; i++) await recordExtraction(second, reference);
    await before.waitFor(3);
    await before.dispose();

    for (let i = 0; i < 2; i++) await recordExtraction(first, reference);
    const after = watch(second, { referenceId: reference, after: before.data.at(-1)!.lifecycleEvents.cursor });
    for (let i = 0; i < 2; i++) await recordExtraction(first, reference);
    await after.waitFor(4);
    expect([...idsOf(before), ...idsOf(after)]).toEqual((await logIds(first, reference)).slice(1));
  });
});

// SQLite: processes sharing one file have no signals between them, only the periodic read of the log.
describe("events without a commit signal on sqlite", () => {
  let writer: TestServer;
  let reader: TestServer;

  beforeAll(async () => {
    writer = await startTestServer("sqlite", { env: FAST });
    reader = await startInstanceOn(writer, { env: FAST });
  });

  afterAll(async () => {
    await reader?.close();
    await writer?.close();
  });

  it("still arrive, in order, through the periodic read of the log", async () => {
    const reference = await createReference(writer, "BK-POLL-sqlite");
    const subscription = subscribe<EventMessage>(reader, EVENTS, { referenceId: reference });
    try {
      await waitForOpenSubscriptions(reader, 1);
      const inserted = (await insertEventDirectly(writer, reference)).id;
      await recordExtraction(writer, reference);
      await subscription.waitFor(2, 5_000);
      expect(idsOf(subscription)).toEqual((await logIds(writer, reference)).slice(1));
      expect(idsOf(subscription)[0]).toBe(inserted);
    } finally {
      await subscription.dispose();
    }
    await eventually(async () => (await metricValue(reader, "reftrail_subscriptions_open")) === 0);
  });
});

// PostgreSQL sends the commit signal itself (migration 0006), whatever process inserted the event.
describe("events written by another process on postgres", () => {
  let writer: TestServer;
  let reader: TestServer;

  beforeAll(async () => {
    writer = await startTestServer("postgres", { env: SIGNALS_ONLY });
    reader = await startInstanceOn(writer, { env: SIGNALS_ONLY });
  });

  afterAll(async () => {
    await reader?.close();
    await writer?.close();
  });

  it("wake every instance at once: the database signals each commit", async () => {
    const reference = await createReference(writer, "BK-DIRECT");
    const onReader = subscribe<EventMessage>(reader, EVENTS, { referenceId: reference });
    const onWriter = subscribe<EventMessage>(writer, EVENTS, { referenceId: reference });
    try {
      await waitForOpenSubscriptions(reader, 1);
      await waitForOpenSubscriptions(writer, 1);
      const inserted = (await insertEventDirectly(writer, reference)).id;
      // Both instances poll once an hour: only a signal brings the event within the deadline.
      await onReader.waitFor(1, 40_000);
      await onWriter.waitFor(1, 40_000);
      expect(idsOf(onReader)).toEqual([inserted]);
      expect(idsOf(onWriter)).toEqual([inserted]);
    } finally {
      await onReader.dispose();
      await onWriter.dispose();
    }
  });
});

// SQLite has one writer at a time: a transaction never runs beside another's commit.
describe("events committed beside a running transaction on postgres", () => {
  let writer: TestServer;
  let reader: TestServer;

  beforeAll(async () => {
    writer = await startTestServer("postgres", { env: FAST });
    reader = await startInstanceOn(writer, { env: SIGNALS_ONLY });
  });

  afterAll(async () => {
    await reader?.close();
    await writer?.close();
  });

  it("go out at once, without waiting for an older transaction, which follows when it commits", async () => {
    const reference = await createReference(writer, "BK-BESIDE");
    const subscription = subscribe<EventMessage>(reader, EVENTS, { referenceId: reference });
    const slow = new pg.Client({ connectionString: writer.database.url });
    await slow.connect();
    try {
      await waitForOpenSubscriptions(reader, 1);
      // A transaction writes an event first, then stays open while another one writes and commits.
      await slow.query("BEGIN");
      const held = newId();
      await slow.query(
        `INSERT INTO "lifecycle_events" ("id", "organization_id", "reference_id", "type", "occurred_at", "detail", "reference_tags")
         VALUES ($1, $2, $3, 'extraction_succeeded', now(), $4, '[]')`,
        [held, writer.organizationId, reference, JSON.stringify({ status: "succeeded" })],
      );
      await recordExtraction(writer, reference);
      // Committed: delivered now (the reader polls once a minute, so the commit signal brought it).
      await subscription.waitFor(1, 5_000);
      const [committed] = idsOf(subscription);
      expect(committed).not.toBe(held);
      await slow.query("COMMIT");
      await subscription.waitFor(2, 5_000);
      // The live order is the order of commits: the transaction that started first comes second.
      expect(idsOf(subscription)).toEqual([committed, held]);
      expect(await liveOrderIds(writer, { type: "extraction_succeeded", referenceId: reference })).toEqual([
        committed,
        held,
      ]);
    } finally {
      await slow.end();
      await subscription.dispose();
    }
  });

  it("keeps a commit number only while its transaction still has events (retention deletes both)", async () => {
    const kept = await createReference(writer, "BK-KEPT");
    const pruned = await createReference(writer, "BK-PRUNED");
    await recordExtraction(writer, kept);
    await recordExtraction(writer, pruned);
    const commitsOf = async (referenceId: string) =>
      (
        await writer.database.prisma.$queryRaw<{ count: bigint }[]>`
          SELECT COUNT(*) AS "count" FROM "lifecycle_commits" c
          WHERE EXISTS (SELECT 1 FROM "lifecycle_events" e WHERE e."reference_id" = ${referenceId}
                        AND e."organization_id" = c."organization_id" AND e."transaction_id" = c."transaction_id")`
      )[0]!.count;
    const totalCommits = async () =>
      (
        await writer.database.prisma.$queryRaw<{ count: bigint }[]>`SELECT COUNT(*) AS "count" FROM "lifecycle_commits"`
      )[0]!.count;
    // Each write (creation, extraction) is one transaction with one number.
    expect(await commitsOf(pruned)).toBe(2n);
    const before = await totalCommits();
    await writer.database.prisma.$executeRaw`DELETE FROM "lifecycle_events" WHERE "reference_id" = ${pruned}`;
    expect(await totalCommits()).toBe(before - 2n);
    expect(await commitsOf(kept)).toBe(2n);
  });
});
