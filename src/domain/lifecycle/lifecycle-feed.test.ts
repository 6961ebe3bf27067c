import { afterEach, describe, expect, it } from "@jest/globals";
import type { Clock } from "../shared/clock.ts";
import { CursorCodec } from "../shared/cursor.ts";
import type { LifecycleEvent } from "./lifecycle-event.ts";
import {
  comparePositions,
  LifecycleFeed,
  positionOf,
  type CommitSignalListener,
  type EventKey,
  type EventKeyRangeQuery,
  type CommitSignals,
  type FeedListener,
  type LifecycleFeedStore,
  type LogPosition,
  type LogRangeQuery,
} from "./lifecycle-feed.ts";
import { isEventPosition } from "./lifecycle-log-service.ts";
import { LifecycleStreamService } from "./lifecycle-stream.ts";

/* The feed's rules on an in-memory log: the settle delay, log order, routing, and catching up. */

class ListLog implements LifecycleFeedStore {
  readonly events: LifecycleEvent[] = [];
  /** Resolves the next read only when the test says so, when set. */
  gate: Promise<void> | undefined;

  async listEventsInRange(query: LogRangeQuery): Promise<LifecycleEvent[]> {
    const organizations = query.organizationIds && new Set(query.organizationIds);
    const rows = this.events
      .filter((event) => !organizations || organizations.has(event.organizationId))
      .filter(
        (event) =>
          comparePositions(positionOf(event), query.after) > 0 && comparePositions(positionOf(event), query.until) <= 0,
      )
      .sort((a, b) => comparePositions(positionOf(a), positionOf(b)))
      .slice(0, query.limit);
    await this.gate;
    return rows;
  }

  async listEventKeysInRange(query: EventKeyRangeQuery): Promise<EventKey[]> {
    return this.listEventsInRange({ ...query, limit: query.limit });
  }

  async findEventsByIds(ids: readonly string[]): Promise<LifecycleEvent[]> {
    return this.events.filter((event) => ids.includes(event.id));
  }
}

class Signals implements CommitSignals {
  listener: CommitSignalListener | undefined;
  publish(): void {}
  onSignal(listener: CommitSignalListener): () => void {
    this.listener = listener;
    return () => (this.listener = undefined);
  }
  async close(): Promise<void> {}
}

class Inbox implements FeedListener {
  readonly received: string[] = [];
  readonly late: string[] = [];
  readonly catchUps: LogPosition[] = [];
  readonly start: LogPosition = { occurredAt: new Date(0), id: "" };
  constructor(
    readonly organizationId: string,
    readonly referenceId?: string,
  ) {}
  deliver(events: readonly LifecycleEvent[]): void {
    this.received.push(...events.map((event) => event.id));
  }
  deliverLate(events: readonly LifecycleEvent[]): void {
    this.late.push(...events.map((event) => event.id));
  }
  catchUp(frontier: LogPosition): void {
    this.catchUps.push(frontier);
  }
  end(): void {}
}

const at = (ms: number) => new Date(Date.UTC(2026, 10, 22) + ms);

let sequence = 0;
function event(organizationId: string, referenceId: string, occurredAtMs: number): LifecycleEvent {
  sequence++;
  return {
    id: `0190${String(sequence).padStart(4, "0")}-0000-7000-8000-000000000000`,
    organizationId,
    referenceId,
    occurredAt: at(occurredAtMs),
    type: "extraction_succeeded",
    detail: { reference_id: referenceId, organization_id: organizationId, status: "succeeded" },
    referenceTags: [],
  };
}

describe("LifecycleFeed", () => {
  let now = 0;
  const clock: Clock = { now: () => at(now) };
  const feeds: LifecycleFeed[] = [];
  const start = (log: ListLog, settleDelayMs = 100) => {
    const feed = new LifecycleFeed(
      log,
      new Signals(),
      clock,
      { settleDelayMs, lateWindowMs: 10_000, pollIntervalMs: 60_000, batchSize: 2 },
      {
        warn: () => undefined,
        error: () => undefined,
      },
    );
    feeds.push(feed);
    return feed;
  };

  afterEach(async () => {
    await Promise.all(feeds.splice(0).map((feed) => feed.close()));
  });

  it("hands out only events older than the settle delay, in log order, to their organization and reference", async () => {
    now = 1_000;
    const log = new ListLog();
    const feed = start(log);
    const all = new Inbox("org-a");
    const onlyR1 = new Inbox("org-a", "r1");
    const other = new Inbox("org-b");
    for (const inbox of [all, onlyR1, other]) feed.register(inbox);
    expect(feed.frontier.occurredAt).toEqual(at(900));

    const late = event("org-a", "r2", 950);
    const early = event("org-a", "r1", 920);
    const fresh = event("org-a", "r1", 990);
    log.events.push(late, early, fresh, event("org-c", "r9", 930));
    await feed.requestRead();
    expect(all.received).toEqual([]);

    now = 1_060; // settled up to 960: early and late, in occurred_at order, across batches of 2
    await feed.requestRead();
    expect(all.received).toEqual([early.id, late.id]);
    expect(onlyR1.received).toEqual([early.id]);
    expect(other.received).toEqual([]);

    now = 1_200;
    await feed.requestRead();
    expect(all.received).toEqual([early.id, late.id, fresh.id]);
    expect(onlyR1.received).toEqual([early.id, fresh.id]);
    expect(feed.frontier.occurredAt).toEqual(at(1_100));
  });

  it("makes a listener of an organization the read in progress did not cover catch up from the log", async () => {
    now = 1_000;
    const log = new ListLog();
    const feed = start(log, 0);
    const first = new Inbox("org-a");
    feed.register(first);
    log.events.push(event("org-b", "r1", 1_500), event("org-a", "r1", 1_500));
    now = 2_000;
    let open!: () => void;
    log.gate = new Promise((resolve) => (open = resolve));
    const reading = feed.requestRead();
    const latecomer = new Inbox("org-b");
    const registeredAt = feed.register(latecomer);
    open();
    await reading;
    expect(first.received).toHaveLength(1);
    expect(latecomer.received).toEqual([]);
    expect(latecomer.catchUps).toEqual([feed.frontier]);
    expect(comparePositions(feed.frontier, registeredAt)).toBeGreaterThan(0);
  });

  it("reads nothing while idle and starts again from the clock", async () => {
    now = 1_000;
    const log = new ListLog();
    const feed = start(log);
    const inbox = new Inbox("org-a");
    feed.register(inbox);
    feed.unregister(inbox);
    log.events.push(event("org-a", "r1", 950));
    now = 5_000;
    await feed.requestRead();
    expect(feed.stats().listeners).toBe(0);
    const again = new Inbox("org-a");
    expect(feed.register(again).occurredAt).toEqual(at(4_900));
    await feed.requestRead();
    expect(again.received).toEqual([]);
  });
});

describe("LifecycleStream with late events", () => {
  let now = 0;
  const clock: Clock = { now: () => at(now) };

  it("sends a late event once: in order when it can, else next with the stream's position as cursor, never twice", async () => {
    now = 1_000;
    const log = new ListLog();
    const signals = new Signals();
    const feed = new LifecycleFeed(
      log,
      signals,
      clock,
      { settleDelayMs: 0, lateWindowMs: 10_000, pollIntervalMs: 60_000 },
      {
        warn: () => undefined,
        error: () => undefined,
      },
    );
    const cursors = new CursorCodec("test");
    const streams = new LifecycleStreamService(
      feed,
      log,
      { getReference: () => Promise.reject(new Error("unused")) },
      cursors,
      clock,
      () => new Date(0),
      { maxQueuedEvents: 100 },
    );
    const replayed = event("org-a", "r1", 600);
    log.events.push(replayed);
    const startAt = { t: at(500).toISOString(), i: "01900000-0000-7000-8000-000000000000" };
    const stream = await streams.open("org-a", { after: cursors.encode(startAt, { scope: "lifecycle-stream" }) });
    const positionOfCursor = (cursor: string) => cursors.decodeIgnoringFilters(cursor, isEventPosition);

    const first = (await stream.next()).value!;
    expect(first.event.id).toBe(replayed.id);

    now = 2_000;
    const onTime = event("org-a", "r1", 1_500);
    log.events.push(onTime);
    await feed.requestRead();
    const second = (await stream.next()).value!;
    expect(second.event.id).toBe(onTime.id);

    // Committed now, behind what the stream already sent; the sweep also finds the replayed event (the feed
    // never handed it out) and the stream skips it.
    const late = event("org-a", "r2", 1_200);
    log.events.push(late);
    signals.listener!({ organizationId: "org-a", earliest: late.occurredAt, latest: late.occurredAt });
    await feed.requestRead();
    const third = (await stream.next()).value!;
    expect(third.event.id).toBe(late.id);
    expect(positionOfCursor(third.cursor)).toEqual(positionOfCursor(second.cursor));
    expect(feed.stats().lateEvents).toBe(1);

    // Another late one, ahead of what was sent: it takes its place in order.
    const laterStill = event("org-a", "r1", 1_700);
    const next = event("org-a", "r1", 1_900);
    log.events.push(next);
    now = 2_000;
    log.events.push(laterStill);
    signals.listener!({ organizationId: "org-a", earliest: laterStill.occurredAt, latest: laterStill.occurredAt });
    await feed.requestRead();
    const rest = [(await stream.next()).value!, (await stream.next()).value!];
    expect(rest.map((message) => message.event.id)).toEqual([laterStill.id, next.id]);
    expect(stream.buffered).toBe(0);
    await streams.close();
  });
});
