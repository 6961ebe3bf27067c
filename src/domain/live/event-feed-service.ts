import type { LifecycleEvent } from "../lifecycle/lifecycle-event.ts";
import { DomainError } from "../shared/errors.ts";
import { MAX_PAGE_SIZE } from "../shared/page.ts";
import type { Store } from "../store.ts";
import type { FeedLogStore, LiveEvent, LiveEventWaiters, LiveEventWaiting } from "./live-feed-ports.ts";
import { comparePositions, laterOf, LOG_START, type LogPosition } from "./log-position.ts";
import type { StreamCursors } from "./stream-cursor.ts";
import {
  matchesStreamFilter,
  resolveStreamFilter,
  type StreamFilter,
  type StreamFilterInput,
} from "./stream-filter.ts";

/*
 * The feed to poll (`GET /v1/events`, `Query.lifecycleEvents`): the organization's whole log in live order (the
 * order of the live subscriptions, src/domain/live/log-position.ts), with the subscriptions' filters and cursors,
 * and an optional long poll. Glossary:
 *
 * - scan: reading the log after a position in live order, in statements of a bounded number of rows (the
 *   reference and type filters run in SQL, the tag filters here, with the subscriptions' predicate), until the
 *   page is full, the log ends, or the rows scanned reach a bound.
 * - next cursor: where the next poll starts. After the page's last event; past it up to the end of the log as the
 *   scan saw it when the scan reached that end (rows the filters left out are not scanned again); at the end of
 *   the log when the log holds nothing for the poller (a poller that starts from nothing gets a cursor meaning
 *   "now"). Nothing can ever appear before that end: live positions become visible in increasing order.
 * - wait: when the scan reached the end of the log without finding an event, the poll waits for the next
 *   matching event through the live feed (LiveEventWaiters), which costs no statement while nothing commits.
 */

export const DEFAULT_FEED_PAGE_SIZE = 100;
export const MAX_FEED_WAIT_SECONDS = 30;
/** Rows per statement of a scan with tag filters (which run here, so a page may need more rows than events). */
const SCAN_BATCH_SIZE = 500;
/**
 * Rows one poll scans at most: a filter that matches little answers with what it found so far, and a cursor. What
 * a poll may cost: REST charges it up front and gives back what the poll did not read (src/rest/cost-budget.hooks.ts).
 */
export const MAX_FEED_ROWS_SCANNED = 5_000;

/** The feed's input as either surface gives it; the service checks every field. */
export interface EventFeedInput extends StreamFilterInput {
  /** A cursor of this feed, of a live subscription, or of a reference's events listing; none: the start of the log. */
  readonly after?: string | null;
  readonly limit?: number | null;
  /** How long to wait for an event when none is found: 0 to 30 seconds, default 0. */
  readonly waitSeconds?: number | null;
}

export interface EventFeedPage {
  /** In live order. */
  readonly events: readonly LifecycleEvent[];
  /** The cursor after each event, in order (computed on first use). */
  readonly cursors: readonly string[];
  /** Where the next poll starts: always present. */
  readonly nextCursor: string;
  /** True when the poll stopped before the end of the log (a full page, or the scan's bound): poll again at once. */
  readonly hasMore: boolean;
  /** Rows of the log the poll read to answer (at least its events; a waiting poll's later reads included). */
  readonly rowsRead: number;
}

export interface PollOptions {
  /** Aborted when the client went away: a waiting poll stops waiting. */
  readonly signal?: AbortSignal;
  /** Called once, when the poll starts waiting (its client then holds no resource but the wait). */
  readonly onWait?: () => void;
}

export interface EventFeedOptions {
  /** Polls that may wait at once for one organization, on this instance. */
  readonly maxWaitingPollsPerOrganization: number;
  /** Rows per statement of a scan with tag filters (default 500) and rows one poll scans at most (5,000). */
  readonly scan?: { readonly batchSize: number; readonly maxRows: number };
}

interface Scan {
  readonly matched: readonly LiveEvent[];
  /** Where the next read starts. */
  readonly position: LogPosition;
  /** The end of the settled log as the last statement saw it. */
  readonly end: LogPosition;
  readonly hasMore: boolean;
  /** Rows of the log read (the store's count). */
  readonly rowsRead: number;
}

export class EventFeedService {
  private waiters: LiveEventWaiters | null = null;
  private readonly waitingByOrganization = new Map<string, number>();
  private waitingCount = 0;
  /** Ends the wait of each waiting poll (at shutdown). */
  private readonly waits = new Set<() => void>();
  /** Set at shutdown: no poll waits any more. */
  private stopped = false;

  constructor(
    private readonly store: Store,
    private readonly log: FeedLogStore,
    private readonly cursors: StreamCursors,
    private readonly retentionCutoff: () => Date,
    private readonly options: EventFeedOptions,
  ) {}

  /** Lets polls wait (the server attaches the live feed; without it, as in the command, `wait` answers at once). */
  attachWaiters(waiters: LiveEventWaiters): void {
    this.waiters = waiters;
  }

  /** Answers every waiting poll now (with what it has) and lets no poll wait from now on: the server is stopping. */
  stopWaiting(): void {
    this.stopped = true;
    for (const end of this.waits) end();
  }

  /** Checks and resolves the filters of a reader of the log in live order (a live subscription too). */
  resolveFilter(organizationId: string, input: StreamFilterInput): Promise<StreamFilter> {
    return resolveStreamFilter(this.store, organizationId, input);
  }

  /** The cursors of the log in live order, shared with the live subscriptions. */
  get streamCursors(): StreamCursors {
    return this.cursors;
  }

  /** Polls waiting now, on this instance. */
  get waitingPolls(): number {
    return this.waitingCount;
  }

  /**
   * A page of the organization's log in live order after `after`, with the filters (see StreamFilter). With
   * `waitSeconds`, a poll that finds nothing up to the end of the log waits until a matching event commits
   * (through any instance sharing the database) or the time is up, then answers (an empty page after the time,
   * with a cursor that misses nothing committed meanwhile). Events past retention are never returned.
   * @throws INVALID_LIMIT, INVALID_QUERY_PARAMETER (wait, tag filters), INVALID_EVENT_TYPE, INVALID_CURSOR,
   *         NOT_FOUND (the reference), TOO_MANY_WAITING_POLLS (the organization's waiting polls are at the bound).
   */
  async readPage(organizationId: string, input: EventFeedInput, options: PollOptions = {}): Promise<EventFeedPage> {
    const limit = checkLimit(input.limit);
    const waitMs = checkWait(input.waitSeconds) * 1_000;
    const filter = await this.resolveFilter(organizationId, input);
    const start = input.after ? await this.cursors.startAfter(organizationId, input.after, "after") : LOG_START;
    const scan = matchesNothing(filter)
      ? await this.skipToEnd(start)
      : await this.scan(organizationId, filter, start, limit);
    if (scan.matched.length > 0 || scan.hasMore || waitMs === 0 || !this.waiters || this.stopped) {
      return this.pageOf(scan);
    }
    return this.waitForEvents(organizationId, filter, scan, limit, waitMs, options);
  }

  /**
   * Where a poll that can match nothing (its tag filter named only tags that do not exist) goes: the end of the
   * log, read without a row of it. Such a poll used to read the scan's bound of rows every time, priced as a
   * page (issue 49.3).
   */
  private async skipToEnd(start: LogPosition): Promise<Scan> {
    const end = await this.log.findSettledEnd();
    return { matched: [], position: laterOf(start, end), end, hasMore: false, rowsRead: 0 };
  }

  private async waitForEvents(
    organizationId: string,
    filter: StreamFilter,
    scanned: Scan,
    limit: number,
    waitMs: number,
    options: PollOptions,
  ): Promise<EventFeedPage> {
    const waiting = this.waitingByOrganization.get(organizationId) ?? 0;
    const max = this.options.maxWaitingPollsPerOrganization;
    if (waiting >= max) {
      throw new DomainError(
        "TOO_MANY_WAITING_POLLS",
        `At most ${max} polls of one organization may wait at once; retry shortly, or poll without {wait}`,
        [],
        { limit: max },
      );
    }
    this.waitingByOrganization.set(organizationId, waiting + 1);
    this.waitingCount++;
    // One signal per poll, ended by its time, its client leaving, or shutdown (not AbortSignal.any over a
    // long-lived signal, which keeps each combined signal alive on some Node versions).
    const stop = new AbortController();
    const end = () => stop.abort();
    const timer = setTimeout(end, waitMs);
    this.waits.add(end);
    options.signal?.addEventListener("abort", end, { once: true });
    if (options.signal?.aborted) end();
    const signal = stop.signal;
    let wait: LiveEventWaiting | undefined;
    try {
      wait = this.waiters!.open(organizationId, filter.referenceId, scanned.position, scanned.end);
      options.onWait?.();
      let position = scanned.position;
      let rowsRead = scanned.rowsRead;
      for (;;) {
        const next = await wait.next(signal);
        if (next === "ended") return this.pageOf({ matched: [], position, end: position, hasMore: false, rowsRead });
        if (next === "read") {
          const scan = await this.scan(organizationId, filter, position, limit);
          rowsRead += scan.rowsRead;
          if (scan.matched.length > 0 || scan.hasMore) return this.pageOf({ ...scan, rowsRead });
          position = scan.position;
          wait.skipTo(position);
          continue;
        }
        // Events the live feed delivered were read once for every waiter: they cost this poll no row.
        const found = takeMatching(next, filter, limit, position);
        if (found.matched.length > 0) return this.pageOf({ ...found, rowsRead });
        position = found.position;
      }
    } finally {
      clearTimeout(timer);
      this.waits.delete(end);
      options.signal?.removeEventListener("abort", end);
      wait?.close();
      this.waitingCount--;
      const left = (this.waitingByOrganization.get(organizationId) ?? 1) - 1;
      if (left > 0) this.waitingByOrganization.set(organizationId, left);
      else this.waitingByOrganization.delete(organizationId);
    }
  }

  /** Reads the log after `from` until `limit` events match, the log ends, or the scan's bound. */
  private async scan(organizationId: string, filter: StreamFilter, from: LogPosition, limit: number): Promise<Scan> {
    const filteredHere = filter.tagIds !== undefined || filter.excludedTagIds !== undefined;
    const bounds = this.options.scan ?? { batchSize: SCAN_BATCH_SIZE, maxRows: MAX_FEED_ROWS_SCANNED };
    const batch = filteredHere ? Math.max(limit, bounds.batchSize) : limit;
    const matched: LiveEvent[] = [];
    let position = from;
    let scanned = 0;
    for (;;) {
      const read = await this.log.readFeedPage({
        organizationId,
        after: position,
        notBefore: this.retentionCutoff(),
        ...(filter.referenceId !== undefined && { referenceId: filter.referenceId }),
        ...(filter.types && { types: [...filter.types] }),
        ...(filter.tagIds && { tagIds: [...filter.tagIds] }),
        ...(filter.excludedTagIds && { excludedTagIds: [...filter.excludedTagIds] }),
        limit: batch,
      });
      // A short page ended the log unless the read says where it stopped short of it (live-feed-ports.ts).
      const complete = read.events.length < batch && read.stoppedAt === undefined;
      for (const [index, live] of read.events.entries()) {
        position = live.position;
        if (!matchesStreamFilter(live.event, filter)) continue;
        matched.push(live);
        if (matched.length === limit) {
          const hasMore = index < read.events.length - 1 || !complete;
          const rowsRead = scanned + read.rowsRead;
          const next = hasMore ? position : laterOf(position, read.end);
          return { matched, position: next, end: read.end, hasMore, rowsRead };
        }
      }
      scanned += read.rowsRead;
      if (complete) {
        return { matched, position: laterOf(position, read.end), end: read.end, hasMore: false, rowsRead: scanned };
      }
      if (read.stoppedAt) position = laterOf(position, read.stoppedAt);
      if (scanned >= bounds.maxRows) return { matched, position, end: read.end, hasMore: true, rowsRead: scanned };
    }
  }

  private pageOf(scan: Scan): EventFeedPage {
    const last = scan.matched.at(-1);
    const endsAtLast = last !== undefined && comparePositions(last.position, scan.position) === 0;
    const nextCursor = endsAtLast ? this.cursors.after(last) : this.cursors.at(scan.position);
    let cursors: readonly string[] | undefined;
    const cursorOf = (live: LiveEvent) => this.cursors.after(live);
    return {
      events: scan.matched.map((live) => live.event),
      get cursors() {
        cursors ??= scan.matched.map((live) => (endsAtLast && live === last ? nextCursor : cursorOf(live)));
        return cursors;
      },
      nextCursor,
      hasMore: scan.hasMore,
      rowsRead: scan.rowsRead,
    };
  }
}

/** The events among `delivered` (live, in order, after `after`) that match, up to `limit`, and where to go on. */
function takeMatching(delivered: readonly LiveEvent[], filter: StreamFilter, limit: number, after: LogPosition): Scan {
  const matched: LiveEvent[] = [];
  let position = after;
  for (const [index, live] of delivered.entries()) {
    position = live.position;
    if (!matchesStreamFilter(live.event, filter)) continue;
    matched.push(live);
    if (matched.length === limit) {
      return { matched, position, end: position, hasMore: index < delivered.length - 1, rowsRead: 0 };
    }
  }
  return { matched, position, end: position, hasMore: false, rowsRead: 0 };
}

/** A filter no event can match: tags were asked for, and none of them exists (see StreamFilter.tagIds). */
function matchesNothing(filter: StreamFilter): boolean {
  return filter.tagIds !== undefined && filter.tagIds.size === 0;
}

function checkLimit(limit: number | null | undefined): number {
  if (limit === undefined || limit === null) return DEFAULT_FEED_PAGE_SIZE;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) {
    throw new DomainError("INVALID_LIMIT", `{limit} must be an integer from 1 to ${MAX_PAGE_SIZE}`, [
      { path: ["limit"], code: "INVALID_LIMIT", message: `must be an integer from 1 to ${MAX_PAGE_SIZE}` },
    ]);
  }
  return limit;
}

function checkWait(seconds: number | null | undefined): number {
  if (seconds === undefined || seconds === null) return 0;
  if (!Number.isInteger(seconds) || seconds < 0 || seconds > MAX_FEED_WAIT_SECONDS) {
    throw new DomainError(
      "INVALID_QUERY_PARAMETER",
      `{wait} must be whole seconds from 0 to ${MAX_FEED_WAIT_SECONDS}`,
      [
        {
          path: ["wait"],
          code: "INVALID_QUERY_PARAMETER",
          message: `must be whole seconds from 0 to ${MAX_FEED_WAIT_SECONDS}`,
        },
      ],
    );
  }
  return seconds;
}
