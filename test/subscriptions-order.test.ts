import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { CursorCodec } from "../src/domain/shared/cursor.ts";
import { gqlData } from "./support/graphql-client.ts";
import { liveOrderIds } from "./support/live-order.ts";
import { subscribe, waitForOpenSubscriptions, type TestSubscription } from "./support/subscription-client.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Subscriptions with no settle delay (docs/decisions.md, "Subscriptions"): ten writers commit at the same time, and
 * every subscriber — on either instance, on PostgreSQL — receives every event exactly once, all in the same
 * order: the log's live order, the order of commits. A subscription resumed from any cursor, even in
 * the middle of the burst, continues with exactly the events that followed it.
 */

const WRITERS = 10;
const EVENTS_PER_WRITER = 12;
const TOTAL = WRITERS * EVENTS_PER_WRITER;
// Only the poll would find an event whose signal was lost; a long poll proves the signals work.
const ENV = { SUBSCRIPTION_POLL_INTERVAL: "30s" };

const EVENTS = `subscription ($after: String) {
  lifecycleEvents(types: [EXTRACTION_SUCCEEDED], after: $after) { cursor node { id referenceId } }
}`;

interface EventMessage {
  lifecycleEvents: { cursor: string; node: { id: string; referenceId: string } };
}

const idsOf = (subscription: TestSubscription<EventMessage>) =>
  subscription.data.map((message) => message.lifecycleEvents.node.id);

async function createReference(server: TestServer, number: string): Promise<string> {
  const data = await gqlData(
    server,
    `mutation ($input: CreateReferenceInput!) { createReference(input: $input) { reference { id } } }`,
    { input: { bookingNumber: number, carrierCode: "CMDU" } },
  );
  return data.createReference.reference.id;
}

async function recordExtraction(server: TestServer, referenceId: string): Promise<void> {
  await gqlData(
    server,
    `mutation ($id: ID!) { recordExtraction(input: { referenceId: $id, status: SUCCEEDED }) { reference { id } } }`,
    { id: referenceId },
  );
}

describe.each(DATABASE_KINDS)("live order with ten concurrent writers on %s", (kind) => {
  let first: TestServer;
  let second: TestServer | undefined;
  const open: TestSubscription<EventMessage>[] = [];
  const watch = (on: TestServer, variables: Record<string, unknown> = {}) => {
    const subscription = subscribe<EventMessage>(on, EVENTS, variables);
    open.push(subscription);
    return subscription;
  };

  beforeAll(async () => {
    first = await startTestServer(kind, { env: ENV });
    // Two instances on one PostgreSQL: writers and subscribers on both.
    if (kind === "postgres") second = await startInstanceOn(first, { env: ENV });
  });

  afterAll(async () => {
    await Promise.all(open.map((subscription) => subscription.dispose()));
    await second?.close();
    await first?.close();
  });

  it("delivers every event once to every subscriber, in the log's live order, and resumes from any cursor", async () => {
    const instances = second ? [first, second] : [first];
    const references = await Promise.all(
      [...Array(WRITERS).keys()].map((n) => createReference(first, `BK-ORDER-${kind}-${n}`)),
    );
    const subscribers = instances.flatMap((instance) => [watch(instance), watch(instance)]);
    for (const instance of instances) await waitForOpenSubscriptions(instance, 2);

    let resumedMidway: TestSubscription<EventMessage> | undefined;
    let resumedAfter = 0;
    const writers = references.map(async (referenceId, n) => {
      for (let i = 0; i < EVENTS_PER_WRITER; i++) {
        await recordExtraction(instances[(n + i) % instances.length]!, referenceId);
        // While the burst goes on, a client resumes from the cursor of a message it got in the middle of it.
        const watched = subscribers[0]!;
        if (!resumedMidway && watched.data.length >= TOTAL / 3) {
          resumedAfter = watched.data.length;
          resumedMidway = watch(instances.at(-1)!, { after: watched.data[resumedAfter - 1]!.lifecycleEvents.cursor });
        }
      }
    });
    await Promise.all(writers);
    for (const subscriber of subscribers) await subscriber.waitFor(TOTAL, 20_000);

    // The order of the log itself, as the database numbers it.
    const expected = await liveOrderIds(first, { type: "extraction_succeeded" });
    expect(expected).toHaveLength(TOTAL);
    for (const subscriber of subscribers) {
      expect(subscriber.errors).toEqual([]);
      expect(idsOf(subscriber)).toEqual(expected);
    }

    expect(resumedMidway).toBeDefined();
    await resumedMidway!.waitFor(TOTAL - resumedAfter, 20_000);
    expect(idsOf(resumedMidway!)).toEqual(expected.slice(resumedAfter));

    // From any message's cursor, on any instance: exactly the events after it.
    const messages = subscribers[0]!.data;
    for (const index of [0, 1, 17, 59, TOTAL - 2, TOTAL - 1]) {
      const resumed = watch(instances[index % instances.length]!, {
        after: messages[index]!.lifecycleEvents.cursor,
      });
      const rest = expected.slice(index + 1);
      if (rest.length > 0) await resumed.waitFor(rest.length, 10_000);
      await recordExtraction(first, references[0]!);
      await resumed.waitFor(rest.length + 1, 10_000);
      expect(idsOf(resumed).slice(0, rest.length)).toEqual(rest);
      expected.push(idsOf(resumed).at(-1)!);
      await resumed.dispose();
    }

    // A cursor issued before commit-ordered positions carried its live position under `l`, in the former order:
    // it resumes after its event, whatever that number says.
    const event = await first.database.prisma.lifecycleEvent.findUniqueOrThrow({ where: { id: expected[41]! } });
    const legacy = new CursorCodec(first.config.cursorSecret).encode(
      { t: event.occurredAt.toISOString(), i: event.id, l: "999999999.1" },
      { scope: "lifecycle-stream" },
    );
    const resumed = watch(first, { after: legacy });
    const rest = expected.slice(42);
    await resumed.waitFor(rest.length, 10_000);
    expect(idsOf(resumed)).toEqual(rest);
  });
});
