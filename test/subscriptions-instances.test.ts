import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import type { LifecycleEvent } from "../src/domain/lifecycle/lifecycle-event.ts";
import { newId } from "../src/domain/shared/ids.ts";
import { gqlData } from "./support/graphql-client.ts";
import {
  eventually,
  metricValue,
  subscribe,
  waitForOpenSubscriptions,
  type TestSubscription,
} from "./support/subscription-client.ts";
import { startInstanceOn, startTestServer, type DatabaseKind, type TestServer } from "./support/test-server.ts";

/*
 * SPEC §2, §10: subscription clients on any instance see events written through any instance. On PostgreSQL
 * instances wake each other with NOTIFY (the receiving instance here polls only once a minute, so a prompt
 * delivery proves the signal works); an event whose signal never comes (written by another process) still
 * arrives through the periodic read of the log. On SQLite, processes sharing one file rely on that read alone.
 */

const FAST = { SUBSCRIPTION_SETTLE_DELAY: "30ms", SUBSCRIPTION_POLL_INTERVAL: "100ms" };
const SIGNALS_ONLY = { SUBSCRIPTION_SETTLE_DELAY: "30ms", SUBSCRIPTION_POLL_INTERVAL: "1m" };

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

/**
 * Appends an event straight to the log, as another process would: no commit signal reaches this one. With
 * `occurredAt` in the past, it is an event whose transaction committed late.
 */
async function insertEventWithoutSignal(
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

    const started = Date.now();
    for (let i = 0; i < 3; i++) await recordExtraction(first, reference);
    for (let i = 0; i < 2; i++) await recordExtraction(second, reference);
    await onSecond.waitFor(5, 5_000);
    await onFirst.waitFor(5, 5_000);
    // Far sooner than either instance's one-minute poll.
    expect(Date.now() - started).toBeLessThan(5_000);
    const log = (await logIds(first, reference)).slice(1);
    expect(idsOf(onSecond)).toEqual(log);
    expect(idsOf(onFirst)).toEqual(log);
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

describe.each<DatabaseKind>(["postgres", "sqlite"])("events without a commit signal on %s", (kind) => {
  let writer: TestServer;
  let reader: TestServer;

  beforeAll(async () => {
    writer = await startTestServer(kind, { env: FAST });
    reader = await startInstanceOn(writer, { env: FAST });
  });

  afterAll(async () => {
    await reader?.close();
    await writer?.close();
  });

  it("still arrive, in order, through the periodic read of the log", async () => {
    const reference = await createReference(writer, `BK-POLL-${kind}`);
    const subscription = subscribe<EventMessage>(reader, EVENTS, { referenceId: reference });
    try {
      await waitForOpenSubscriptions(reader, 1);
      const inserted = (await insertEventWithoutSignal(writer, reference)).id;
      await recordExtraction(writer, reference);
      await subscription.waitFor(2, 5_000);
      expect(idsOf(subscription)).toEqual((await logIds(writer, reference)).slice(1));
      expect(idsOf(subscription)[0]).toBe(inserted);
      expect(await metricValue(reader, "reftrail_subscription_late_events_total")).toBe(0);
    } finally {
      await subscription.dispose();
    }
    await eventually(async () => (await metricValue(reader, "reftrail_subscriptions_open")) === 0);
  });

  it("that committed after live subscriptions passed them still arrive, once, and cursors stay exact", async () => {
    const reference = await createReference(writer, `BK-LATE-${kind}`);
    const created = (
      await gqlData(writer, `query ($id: ID!) { reference(id: $id) { events { edges { cursor } } } }`, {
        id: reference,
      })
    ).reference.events.edges[0].cursor;
    const live = subscribe<EventMessage>(reader, EVENTS, { referenceId: reference, after: created });
    const later: TestSubscription<EventMessage>[] = [];
    try {
      await waitForOpenSubscriptions(reader, 1);
      await recordExtraction(writer, reference);
      await live.waitFor(1);
      await new Promise((resolve) => setTimeout(resolve, 400));
      // Committed long after the feed passed their occurred_at: one found by the periodic sweep, one through its
      // commit signal.
      const unsignalled = await insertEventWithoutSignal(writer, reference, new Date(Date.now() - 250));
      const signalled = await insertEventWithoutSignal(writer, reference, new Date(Date.now() - 200));
      reader.app.services.recorder.committed([signalled]);
      await recordExtraction(writer, reference);
      await live.waitFor(4, 5_000);
      expect(new Set(idsOf(live))).toEqual(new Set((await logIds(writer, reference)).slice(1)));
      expect(idsOf(live)).toHaveLength(4);
      expect(idsOf(live)).toEqual(expect.arrayContaining([unsignalled.id, signalled.id]));
      expect(await metricValue(reader, "reftrail_subscription_late_events_total")).toBe(2);

      // Resuming from any message's cursor repeats nothing that message's subscription had sent before it.
      for (const [index, message] of live.data.entries()) {
        const resumed = subscribe<EventMessage>(reader, EVENTS, {
          referenceId: reference,
          after: message.lifecycleEvents.cursor,
        });
        later.push(resumed);
        await resumed.waitFor(
          () => resumed.data.length > 0 || resumed.errors.length > 0 || index === live.data.length - 1,
          3_000,
        );
        await new Promise((resolve) => setTimeout(resolve, 100));
        const before = new Set(idsOf(live).slice(0, index + 1));
        expect(idsOf(resumed).filter((id) => before.has(id))).toEqual([]);
      }
    } finally {
      await Promise.all([live, ...later].map((subscription) => subscription.dispose()));
    }
  });
});
