import type { LifecycleEvent } from "../domain/lifecycle/lifecycle-event.ts";
import type { LiveEvent, LiveLogStore } from "../domain/live/live-feed-ports.ts";
import { comparePositions, type LogPosition } from "../domain/live/log-position.ts";
import type { StreamCursors } from "../domain/live/stream-cursor.ts";
import { matchesStreamFilter, type StreamFilter, type StreamFilterInput } from "../domain/live/stream-filter.ts";
import type { LiveFeed, LiveListener } from "./live-feed.ts";

/*
 * Live subscriptions: each is an async iterator over the organization's lifecycle events that match
 * its filters, first replaying the log after a cursor, then continuing live from the feed, in live order (see
 * log-position.ts), with no gap and no duplicate. Glossary (see also live-feed.ts):
 *
 * - position: the last event handed to the consumer (or the position it started after). Only events after it
 *   are handed out, which is what makes the switch from replay to live free of duplicates.
 * - replay: reading the log itself, page by page, up to a bound (`replayUntil`) that the feed has already
 *   passed. The stream registers with the feed *before* replaying, so every event after that bound reaches its
 *   queue: replay and live meet with no gap.
 * - queue: live events waiting for a consumer. The queue and the replay page share one bound
 *   (`maxQueuedEvents`). When a slow consumer lets the queue fill up, it is dropped and the stream falls back to
 *   replay from its position up to the feed's frontier: the log is the source of truth, so a slow consumer
 *   costs bounded memory, loses nothing, and catches up at its own pace (the "catch-up subscription" pattern).
 */

/** What a subscription hands out: the event and the cursor to resume after it. */
export interface StreamMessage {
  readonly event: LifecycleEvent;
  readonly cursor: string;
}

interface StreamDependencies {
  readonly feed: LiveFeed;
  readonly store: LiveLogStore;
  /** The oldest `occurred_at` still inside the retention window. */
  readonly retentionCutoff: () => Date;
  readonly encodeCursor: (live: LiveEvent) => string;
  readonly maxQueuedEvents: number;
  readonly pageSize: number;
  readonly onFallBehind: () => void;
  readonly onEnd: (stream: LiveStream) => void;
}

/**
 * One subscription's events in live order. Created by {@link LiveSubscriptions.open}; stops at `return()`
 * (the client unsubscribed or disconnected) or when the feed closes (shutdown).
 */
export class LiveStream implements AsyncIterableIterator<StreamMessage>, LiveListener {
  readonly referenceId: string | undefined;
  private position: LogPosition;
  /** Replay: the last row read from the log, matching or not. */
  private scanned: LogPosition;
  /** Replay bound while replaying; null when live. */
  private replayUntil: LogPosition | null;
  private readonly page: LiveEvent[] = [];
  private readonly queue: LiveEvent[] = [];
  /** The limit of the replay page being read now (0 when none): room the live queue leaves for it. */
  private pageBeingRead = 0;
  private wake: (() => void) | undefined;
  private done = false;

  constructor(
    readonly organizationId: string,
    private readonly filter: StreamFilter,
    start: LogPosition,
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
    return this.page.length + this.queue.length;
  }

  deliver(events: readonly LiveEvent[]): void {
    if (this.done) return;
    for (const live of events) {
      if (!matchesStreamFilter(live.event, this.filter)) continue;
      if (this.queue.length + this.page.length + this.pageBeingRead >= this.deps.maxQueuedEvents) {
        // Everything dropped here is in the log up to the feed's frontier, which the replay reads again.
        this.deps.onFallBehind();
        this.catchUp(this.deps.feed.frontier);
        return;
      }
      this.queue.push(live);
    }
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
        const live = this.take();
        if (live) return { value: { event: live.event, cursor: this.deps.encodeCursor(live) }, done: false };
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
  private take(): LiveEvent | undefined {
    let next = this.page.shift();
    if (next) {
      this.position = next.position;
      return next;
    }
    if (this.replayUntil) return undefined;
    while ((next = this.queue.shift())) {
      if (comparePositions(next.position, this.position) <= 0) continue;
      this.position = next.position;
      return next;
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
      // Held for the page while it is read: events delivered meanwhile must leave room for it, or the queue and
      // the page together could pass the bound by up to a page.
      this.pageBeingRead = limit;
      let rows: LiveEvent[];
      try {
        rows = await this.deps.store.readRange({
          organizationId: this.organizationId,
          after,
          until,
          notBefore: this.deps.retentionCutoff(),
          ...(this.filter.referenceId !== undefined && { referenceId: this.filter.referenceId }),
          ...(this.filter.types && { types: [...this.filter.types] }),
          limit,
        });
      } finally {
        this.pageBeingRead = 0;
      }
      if (this.done) return;
      if (rows.length > 0) this.scanned = rows.at(-1)!.position;
      // The tag filter runs here rather than in SQL: one predicate for replay and live, on both databases.
      for (const row of rows) if (matchesStreamFilter(row.event, this.filter)) this.page.push(row);
      complete = rows.length < limit;
    }
    // A catch-up during the read moved the bound: keep replaying up to the new one.
    if (complete && this.replayUntil === until) this.replayUntil = null;
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
    this.deps.onEnd(this);
    this.notify();
  }
}

export interface OpenStreamInput extends StreamFilterInput {
  /**
   * A cursor: from a subscription message, the feed to poll (`GET /v1/events`, `Query.lifecycleEvents`), or an
   * edge of `Reference.events` / the REST events listing.
   */
  readonly after?: string | null;
}

export interface LiveSubscriptionOptions {
  /** Live events one subscription may hold for its consumer before it falls back to reading the log. */
  readonly maxQueuedEvents: number;
  /** Rows per read of the log during replay. */
  readonly pageSize?: number;
}

export interface LiveSubscriptionStats {
  readonly open: number;
  readonly bufferedEvents: number;
  /** How many times a subscription's queue overflowed and it fell back to reading the log. */
  readonly fellBehind: number;
}

/** Opens live subscriptions to the lifecycle log. */
export class LiveSubscriptions {
  private readonly streams = new Set<LiveStream>();
  private fellBehind = 0;

  constructor(
    private readonly feed: LiveFeed,
    private readonly store: LiveLogStore,
    /** Checks and resolves a subscription's filters (src/domain/live/stream-filter.ts). */
    private readonly resolveFilter: (organizationId: string, input: StreamFilterInput) => Promise<StreamFilter>,
    private readonly cursors: StreamCursors,
    private readonly retentionCutoff: () => Date,
    private readonly options: LiveSubscriptionOptions,
  ) {}

  /**
   * Starts a subscription to the organization's events that match the filters (src/domain/live/stream-filter.ts:
   * all given filters must match; an empty list is no filter; unknown tag ids and names match nothing). With
   * `after`, the events after that cursor are replayed first; without, the subscription starts at the end of the
   * log: it receives what commits from now on.
   * @throws NOT_FOUND (the reference is not the organization's), INVALID_QUERY_PARAMETER (a malformed tag id, too
   *         many tag values), INVALID_EVENT_TYPE, INVALID_CURSOR (malformed, altered, or not a lifecycle event cursor).
   */
  async open(organizationId: string, input: OpenStreamInput): Promise<LiveStream> {
    const filter = await this.resolveFilter(organizationId, input);
    // Without a cursor, "now": the end of the log as it is committed at this moment.
    const start = input.after
      ? await this.cursors.startAfter(organizationId, input.after, "after")
      : await this.store.findSettledEnd();
    await this.feed.prepare();
    const stream = new LiveStream(organizationId, filter, start, {
      feed: this.feed,
      store: this.store,
      retentionCutoff: this.retentionCutoff,
      encodeCursor: (live) => this.cursors.after(live),
      maxQueuedEvents: this.options.maxQueuedEvents,
      pageSize: this.options.pageSize ?? 200,
      onFallBehind: () => this.fellBehind++,
      onEnd: (ended) => this.streams.delete(ended),
    });
    this.streams.add(stream);
    return stream;
  }

  stats(): LiveSubscriptionStats {
    let bufferedEvents = 0;
    for (const stream of this.streams) bufferedEvents += stream.buffered;
    return { open: this.streams.size, bufferedEvents, fellBehind: this.fellBehind };
  }

  /** Ends every subscription and stops the feed. */
  close(): Promise<void> {
    return this.feed.close();
  }
}
