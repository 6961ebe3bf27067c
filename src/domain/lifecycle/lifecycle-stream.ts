import type { Reference } from "../models.ts";
import type { Clock } from "../shared/clock.ts";
import type { CursorCodec } from "../shared/cursor.ts";
import { DomainError } from "../shared/errors.ts";
import { isUuid } from "../shared/ids.ts";
import {
  isLifecycleEventType,
  LIFECYCLE_EVENT_TYPES,
  type LifecycleEvent,
  type LifecycleEventType,
} from "./lifecycle-event.ts";
import {
  comparePositions,
  LATE_WINDOW_MARGIN_MS,
  positionOf,
  type FeedListener,
  type LifecycleFeed,
  type LifecycleFeedStore,
  type LogPosition,
} from "./lifecycle-feed.ts";
import { isEventPosition, type EventPosition } from "./lifecycle-log-service.ts";

/*
 * One live subscription (SPEC §10): an async iterator over the organization's lifecycle events that match its
 * filters, first replaying the log after a cursor, then continuing live from the feed, with no gap and no
 * duplicate. Glossary (see also lifecycle-feed.ts):
 *
 * - position: the last event handed to the consumer (or the cursor it started after). Only events after it are
 *   handed out, which is what makes the switch from replay to live free of duplicates.
 * - replay: reading the log itself, page by page, up to a bound (`replayUntil`) that the feed has already
 *   passed. The stream registers with the feed *before* replaying, so every event after that bound reaches its
 *   queue: replay and live meet with no gap.
 * - queue: live events waiting for a consumer. The queue and the replay page share one bound
 *   (`maxQueuedEvents`). When a slow consumer lets the queue fill up, it is dropped and the stream falls back to
 *   replay from its position up to the feed's frontier: the log is the source of truth, so a slow consumer
 *   costs bounded memory, loses nothing, and catches up at its own pace (the "catch-up subscription" pattern).
 * - late event: one the feed hands out after passing its position (see lifecycle-feed.ts). If the stream has not
 *   sent past it yet, it takes its place in log order; otherwise it is sent next, out of order, and the message's
 *   cursor stays the stream's position (resuming from it neither repeats nor skips anything). The feed never
 *   hands out an event twice, but the stream may have read it itself while replaying: it remembers the events it
 *   replayed during the late window, and skips those.
 */

/** Which events a subscription receives. Empty sets are not used: an absent field means "any". */
export interface StreamFilter {
  readonly referenceId?: string;
  readonly types?: ReadonlySet<LifecycleEventType>;
  /**
   * Events whose reference carried at least one of these tags *when the event was written* (the event's
   * `referenceTags` snapshot, as in webhook payloads): the same answer whether the event is replayed or live.
   */
  readonly tagIds?: ReadonlySet<string>;
}

export function matchesStreamFilter(event: LifecycleEvent, filter: StreamFilter): boolean {
  if (filter.referenceId !== undefined && event.referenceId !== filter.referenceId) return false;
  if (filter.types && !filter.types.has(event.type)) return false;
  if (filter.tagIds) {
    const tagIds = filter.tagIds;
    if (!event.referenceTags.some((tag) => tagIds.has(tag.id))) return false;
  }
  return true;
}

/** What a subscription hands out: the event and the cursor to resume after it. */
export interface StreamMessage {
  readonly event: LifecycleEvent;
  readonly cursor: string;
}

interface StreamDependencies {
  readonly feed: LifecycleFeed;
  readonly store: LifecycleFeedStore;
  /** The oldest `occurred_at` still inside the retention window. */
  readonly retentionCutoff: () => Date;
  readonly encodeCursor: (position: LogPosition) => string;
  readonly maxQueuedEvents: number;
  readonly pageSize: number;
  readonly onFallBehind: () => void;
  readonly onEnd: (stream: LifecycleStream) => void;
}

/**
 * One subscription's events in log order. Created by {@link LifecycleStreamService.open}; stops at `return()`
 * (the client unsubscribed or disconnected) or when the feed closes (shutdown).
 */
export class LifecycleStream implements AsyncIterableIterator<StreamMessage>, FeedListener {
  readonly referenceId: string | undefined;
  private position: LogPosition;
  /** Replay: the last row read from the log, matching or not. */
  private scanned: LogPosition;
  /** Replay bound while replaying; null when live. */
  private replayUntil: LogPosition | null;
  private readonly page: LifecycleEvent[] = [];
  private readonly queue: LifecycleEvent[] = [];
  /** Late events to send next, out of order. */
  private readonly late: LifecycleEvent[] = [];
  /** Late events that arrived during a replay read; judged once the read's rows are known. */
  private readonly lateDuringRead: LifecycleEvent[] = [];
  /** Events this stream read while replaying that could still come back as late events: id -> occurred_at (ms). */
  private readonly replayed = new Map<string, number>();
  private readingPage = false;
  private wake: (() => void) | undefined;
  private done = false;

  constructor(
    readonly organizationId: string,
    private readonly filter: StreamFilter,
    readonly start: LogPosition,
    private readonly deps: StreamDependencies,
  ) {
    this.referenceId = filter.referenceId;
    const frontier = deps.feed.register(this);
    this.position = start;
    this.scanned = start;
    this.replayUntil = comparePositions(start, frontier) < 0 ? frontier : null;
  }

  /** Events held for the consumer (replay page and live queue): at most `maxQueuedEvents`. */
  get buffered(): number {
    return this.page.length + this.queue.length + this.late.length + this.lateDuringRead.length;
  }

  deliver(events: readonly LifecycleEvent[]): void {
    if (this.done) return;
    for (const event of events) {
      if (!matchesStreamFilter(event, this.filter)) continue;
      if (this.queue.length + this.page.length >= this.deps.maxQueuedEvents) {
        // Everything dropped here is in the log up to the feed's frontier, which the replay reads again.
        this.deps.onFallBehind();
        this.catchUp(this.deps.feed.frontier);
        return;
      }
      this.queue.push(event);
    }
    this.notify();
  }

  deliverLate(events: readonly LifecycleEvent[]): void {
    if (this.done) return;
    for (const event of events) if (matchesStreamFilter(event, this.filter)) this.placeLate(event);
    this.notify();
  }

  catchUp(frontier: LogPosition): void {
    if (this.done) return;
    this.queue.length = 0;
    if (this.replayUntil === null || comparePositions(frontier, this.replayUntil) > 0) this.replayUntil = frontier;
    this.notify();
  }

  end(): void {
    this.done = true;
    this.release();
  }

  async next(): Promise<IteratorResult<StreamMessage, undefined>> {
    try {
      while (!this.done) {
        const event = this.take();
        if (event) return { value: { event, cursor: this.deps.encodeCursor(this.position) }, done: false };
        if (this.replayUntil) await this.readPage(this.replayUntil);
        else await new Promise<void>((resolve) => (this.wake = resolve));
      }
    } catch (error) {
      this.finish();
      throw error;
    }
    return { value: undefined, done: true };
  }

  async return(): Promise<IteratorResult<StreamMessage, undefined>> {
    this.finish();
    return { value: undefined, done: true };
  }

  async throw(error?: unknown): Promise<IteratorResult<StreamMessage, undefined>> {
    this.finish();
    throw error;
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  /** The next event for the consumer, if one is ready: replayed rows first, then live ones. */
  private take(): LifecycleEvent | undefined {
    // Already behind the position: sent as is, the position (and so the cursor) stays where it is.
    const late = this.late.shift();
    if (late) return late;
    const replayed = this.page.shift();
    if (replayed) {
      this.position = positionOf(replayed);
      return replayed;
    }
    if (this.replayUntil) return undefined;
    let event: LifecycleEvent | undefined;
    while ((event = this.queue.shift())) {
      const position = positionOf(event);
      if (comparePositions(position, this.position) > 0) {
        this.position = position;
        return event;
      }
    }
    return undefined;
  }

  /** Reads the next page of the log up to `until`; switches to live once the log is read up to the bound. */
  private async readPage(until: LogPosition): Promise<void> {
    const after = comparePositions(this.scanned, this.position) > 0 ? this.scanned : this.position;
    let complete = comparePositions(after, until) >= 0;
    if (!complete) {
      // The page counts against the same bound as the live queue.
      const limit = Math.max(1, Math.min(this.deps.pageSize, this.deps.maxQueuedEvents - this.queue.length));
      this.readingPage = true;
      const rows = await this.deps.store
        .listEventsInRange({
          organizationIds: [this.organizationId],
          after,
          until,
          notBefore: this.deps.retentionCutoff(),
          ...(this.filter.referenceId !== undefined && { referenceId: this.filter.referenceId }),
          ...(this.filter.types && { types: [...this.filter.types] }),
          limit,
        })
        .finally(() => {
          this.readingPage = false;
        });
      if (this.done) return;
      if (rows.length > 0) this.scanned = positionOf(rows.at(-1)!);
      const lateFrom =
        this.deps.feed.frontier.occurredAt.getTime() - this.deps.feed.lateWindowMs - LATE_WINDOW_MARGIN_MS;
      this.forgetReplayedBefore(lateFrom);
      // The tag filter runs here rather than in SQL: one predicate for replay and live, on both databases.
      for (const row of rows) {
        if (!matchesStreamFilter(row, this.filter)) continue;
        this.page.push(row);
        if (row.occurredAt.getTime() >= lateFrom) this.replayed.set(row.id, row.occurredAt.getTime());
      }
      for (const event of this.lateDuringRead.splice(0)) this.placeLate(event);
      complete = rows.length < limit;
    }
    // A catch-up during the read moved the bound: keep replaying up to the new one.
    if (complete && this.replayUntil === until) this.replayUntil = null;
  }

  /** Where a late event goes: nowhere if already sent or about to be replayed, else in order or next. */
  private placeLate(event: LifecycleEvent): void {
    const position = positionOf(event);
    if (comparePositions(position, this.start) <= 0 || this.replayed.has(event.id)) return;
    if (this.readingPage) {
      this.lateDuringRead.push(event);
      return;
    }
    if (this.replayUntil) {
      const replayFrom = comparePositions(this.scanned, this.position) > 0 ? this.scanned : this.position;
      if (comparePositions(position, replayFrom) > 0) {
        // The replay reads it (committed now), or it belongs with the live events after the replay's bound.
        if (comparePositions(position, this.replayUntil) > 0) insertInOrder(this.queue, event);
        return;
      }
      // Read past but not sent yet: it takes its place among the replayed rows.
      if (comparePositions(position, this.position) > 0) {
        insertInOrder(this.page, event);
        return;
      }
    } else if (comparePositions(position, this.position) > 0) {
      insertInOrder(this.queue, event);
      return;
    }
    this.late.push(event);
  }

  private forgetReplayedBefore(cutoffMs: number): void {
    for (const [id, occurredAtMs] of this.replayed) {
      if (occurredAtMs >= cutoffMs) break;
      this.replayed.delete(id);
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.deps.feed.unregister(this);
    this.release();
  }

  private release(): void {
    this.page.length = 0;
    this.queue.length = 0;
    this.late.length = 0;
    this.lateDuringRead.length = 0;
    this.replayed.clear();
    this.deps.onEnd(this);
    this.notify();
  }
}

/** Inserts `event` into `events` (in log order) at its place. */
function insertInOrder(events: LifecycleEvent[], event: LifecycleEvent): void {
  const position = positionOf(event);
  let index = events.length;
  while (index > 0 && comparePositions(positionOf(events[index - 1]!), position) > 0) index--;
  events.splice(index, 0, event);
}

export interface OpenStreamInput {
  readonly referenceId?: string | null;
  readonly tagIds?: readonly string[] | null;
  readonly types?: readonly string[] | null;
  /** A cursor: from a subscription message, or an edge of `Reference.events` / the REST events listing. */
  readonly after?: string | null;
}

export interface LifecycleStreamOptions {
  /** Live events one subscription may hold for its consumer before it falls back to reading the log. */
  readonly maxQueuedEvents: number;
  /** Rows per read of the log during replay. */
  readonly pageSize?: number;
}

export interface LifecycleStreamStats {
  readonly open: number;
  readonly bufferedEvents: number;
  /** How many times a subscription's queue overflowed and it fell back to reading the log. */
  readonly fellBehind: number;
}

// Subscription cursors hold a position in the organization's log, valid whatever the subscription's filters.
const STREAM_CURSOR_SCOPE = { scope: "lifecycle-stream" };

/** Opens live subscriptions to the lifecycle log (SPEC §10). */
export class LifecycleStreamService {
  private readonly streams = new Set<LifecycleStream>();
  private fellBehind = 0;

  constructor(
    private readonly feed: LifecycleFeed,
    private readonly store: LifecycleFeedStore,
    private readonly references: { getReference(organizationId: string, id: string): Promise<Reference> },
    private readonly cursors: CursorCodec,
    private readonly clock: Clock,
    private readonly retentionCutoff: () => Date,
    private readonly options: LifecycleStreamOptions,
  ) {}

  /**
   * Starts a subscription to the organization's events that match the filters (all given filters must match;
   * an empty list is no filter; unknown tag ids match nothing). With `after`, the events after that cursor are
   * replayed first; without, the subscription starts now: it receives the events that occur from now on.
   * @throws NOT_FOUND (the reference is not the organization's), INVALID_QUERY_PARAMETER (a malformed tag id),
   *         INVALID_EVENT_TYPE, INVALID_CURSOR (malformed, altered, or not a lifecycle event cursor).
   */
  async open(organizationId: string, input: OpenStreamInput): Promise<LifecycleStream> {
    const filter: { referenceId?: string; types?: Set<LifecycleEventType>; tagIds?: Set<string> } = {};
    const tagIds = input.tagIds ?? [];
    const malformed = tagIds.flatMap((id, index) => (isUuid(id) ? [] : [index]));
    if (malformed.length > 0) {
      throw new DomainError(
        "INVALID_QUERY_PARAMETER",
        "tagIds must be tag ids (UUIDs)",
        malformed.map((index) => ({ path: ["tagIds", index], code: "INVALID_QUERY_PARAMETER", message: "not a UUID" })),
      );
    }
    if (tagIds.length > 0) filter.tagIds = new Set(tagIds.map((id) => id.toLowerCase()));
    const types = input.types ?? [];
    const unknown = types.filter((type) => !isLifecycleEventType(type));
    if (unknown.length > 0) {
      throw new DomainError("INVALID_EVENT_TYPE", `Unknown event type ${unknown.map((t) => `"${t}"`).join(", ")}`, [
        { path: ["types"], code: "INVALID_EVENT_TYPE", message: `valid types are ${LIFECYCLE_EVENT_TYPES.join(", ")}` },
      ]);
    }
    if (types.length > 0) filter.types = new Set(types as LifecycleEventType[]);
    const after = input.after ? this.decodeCursor(input.after) : undefined;
    if (input.referenceId !== undefined && input.referenceId !== null) {
      filter.referenceId = (await this.references.getReference(organizationId, input.referenceId)).id;
    }
    // "From now on": every event at or after this millisecond (the empty id sorts before every id).
    const start = after ?? { occurredAt: this.clock.now(), id: "" };
    const stream = new LifecycleStream(organizationId, filter, start, {
      feed: this.feed,
      store: this.store,
      retentionCutoff: this.retentionCutoff,
      encodeCursor: (position) => this.encodeCursor(position),
      maxQueuedEvents: this.options.maxQueuedEvents,
      pageSize: this.options.pageSize ?? 200,
      onFallBehind: () => this.fellBehind++,
      onEnd: (ended) => this.streams.delete(ended),
    });
    this.streams.add(stream);
    return stream;
  }

  stats(): LifecycleStreamStats {
    let bufferedEvents = 0;
    for (const stream of this.streams) bufferedEvents += stream.buffered;
    return { open: this.streams.size, bufferedEvents, fellBehind: this.fellBehind };
  }

  /** Ends every subscription and stops the feed. */
  close(): Promise<void> {
    return this.feed.close();
  }

  private encodeCursor(position: LogPosition): string {
    return this.cursors.encode<EventPosition>(
      { t: position.occurredAt.toISOString(), i: position.id },
      STREAM_CURSOR_SCOPE,
    );
  }

  private decodeCursor(cursor: string): LogPosition {
    // Any event cursor is a position in the log, whichever listing (and filters) it came from.
    const position = this.cursors.decodeIgnoringFilters(cursor, isEventPosition, "after");
    return { occurredAt: new Date(position.t), id: position.i.toLowerCase() };
  }
}
