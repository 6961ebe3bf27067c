import type { Clock } from "../shared/clock.ts";
import type { LifecycleEvent, LifecycleEventType } from "./lifecycle-event.ts";

/*
 * The live side of the lifecycle log (SPEC §10): one feed per process reads newly committed events from the log
 * and hands each to the live subscriptions (listeners) of its organization. Glossary:
 *
 * - position: an event's place in the log, `(occurred_at, id)`; the log's order everywhere.
 * - frontier: the position up to which the feed has read the log and handed every event it found to the
 *   listeners of its organization. It trails the clock by the settle delay and only moves forward.
 * - settle delay: how long after its `occurred_at` an event is handed out. `occurred_at` is taken inside the
 *   transaction, and transactions commit in their own order: one that took `occurred_at` first may commit after
 *   one that took it later. Reading only events older than the settle delay lets every such transaction commit
 *   first (in practice they take milliseconds), so the feed reads the log in order and events go out in order.
 *   The price is that delay in latency.
 * - late event: one whose transaction committed after the frontier had passed its position (a transaction
 *   slower than the settle delay, or instance clocks that disagree). The feed remembers which events it handed
 *   out during the late window and sweeps that window of the log for committed events it never handed out: at
 *   once when a commit signal reveals one, and every few polls in case its signal was lost. Late events are
 *   handed out through `deliverLate`: once, but out of order. Only a transaction that commits more than the late
 *   window after its `occurred_at` escapes live subscribers (the log still has it).
 * - commit signal: a hint that a transaction committed events for an organization (in-process, or a PostgreSQL
 *   NOTIFY from another instance). Signals only decide *when* to read: the log is the source of truth, and a
 *   periodic read covers any signal that is lost.
 */

/** A place in the log: `(occurredAt, id)`, compared in that order. */
export interface LogPosition {
  readonly occurredAt: Date;
  readonly id: string;
}

/** Larger than every UUID, so `(t, MAX_EVENT_ID)` is "after every event at time t". */
export const MAX_EVENT_ID = "ffffffff-ffff-ffff-ffff-ffffffffffff";

export function comparePositions(a: LogPosition, b: LogPosition): number {
  const byTime = a.occurredAt.getTime() - b.occurredAt.getTime();
  if (byTime !== 0) return byTime;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

export function positionOf(event: Pick<LifecycleEvent, "occurredAt" | "id">): LogPosition {
  return { occurredAt: event.occurredAt, id: event.id };
}

/** The events in `(after, until]` of some organizations (every organization when absent), in log order. */
export interface EventKeyRangeQuery {
  readonly organizationIds?: readonly string[];
  readonly after: LogPosition;
  readonly until: LogPosition;
  readonly limit: number;
}

/** A range of the log with filters, at most `limit` events. */
export interface LogRangeQuery extends EventKeyRangeQuery {
  /** Skip events that occurred before this (retention). */
  readonly notBefore?: Date;
  readonly referenceId?: string;
  readonly types?: readonly LifecycleEventType[];
}

/** An event's identity and position, without its content. */
export interface EventKey {
  readonly id: string;
  readonly organizationId: string;
  readonly occurredAt: Date;
}

/** What the feed and the subscriptions read from persistence (implemented in src/store/). */
export interface LifecycleFeedStore {
  listEventsInRange(query: LogRangeQuery): Promise<LifecycleEvent[]>;
  listEventKeysInRange(query: EventKeyRangeQuery): Promise<EventKey[]>;
  findEventsByIds(ids: readonly string[]): Promise<LifecycleEvent[]>;
}

/** One committed transaction's events of one organization: the earliest and latest `occurred_at` among them. */
export interface CommitSignal {
  readonly organizationId: string;
  readonly earliest: Date;
  readonly latest: Date;
}

/** `null` means "signals may have been missed" (e.g. after a reconnect): read now. */
export type CommitSignalListener = (signal: CommitSignal | null) => void;

/** Commit signals across the instances that share a database (implemented in src/store/event-notifier.ts). */
export interface CommitSignals {
  /** Call after the transaction that wrote `events` committed. Never throws; delivery is best effort. */
  publish(events: readonly LifecycleEvent[]): void;
  onSignal(listener: CommitSignalListener): () => void;
  close(): Promise<void>;
}

/** One live subscription, as the feed sees it. */
export interface FeedListener {
  readonly organizationId: string;
  /** When set, only this reference's events are delivered (the feed indexes listeners by it). */
  readonly referenceId?: string;
  /** The listener wants only events after this position. */
  readonly start: LogPosition;
  /** Events of the listener's organization (and reference), in log order, all after the frontier it registered at. */
  deliver(events: readonly LifecycleEvent[]): void;
  /**
   * Events the feed found committed behind its frontier (see the glossary), in log order among themselves, each
   * handed out once. Some may be events the listener read itself while replaying: it must skip those.
   */
  deliverLate(events: readonly LifecycleEvent[]): void;
  /** The feed moved to `frontier` without delivering to this listener: it must read the log up to there itself. */
  catchUp(frontier: LogPosition): void;
  /** The feed stopped; no more events will come. */
  end(): void;
}

export interface FeedLog {
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

export interface LifecycleFeedOptions {
  readonly settleDelayMs: number;
  readonly pollIntervalMs: number;
  /** How far behind the frontier the feed looks for late events. */
  readonly lateWindowMs: number;
  /** Events per read of the log; a larger backlog is read in several steps. */
  readonly batchSize?: number;
}

export interface LifecycleFeedStats {
  readonly listeners: number;
  /** Events that committed after the feed had passed their position, handed out late. */
  readonly lateEvents: number;
}

interface OrganizationListeners {
  /** Listeners of every event of the organization (no reference filter). */
  readonly all: Set<FeedListener>;
  readonly byReference: Map<string, Set<FeedListener>>;
  size: number;
}

// Reading the log for every organization with a listener in one query; past this many organizations the query
// reads every organization's events instead of naming them.
const MAX_ORGANIZATIONS_PER_QUERY = 200;
/** Without a signal revealing a late event, the late window is swept every this many polls. */
const POLLS_PER_SWEEP = 5;
/** Kept a little longer than the window, so that the edge of a sweep never meets a forgotten id. */
export const LATE_WINDOW_MARGIN_MS = 2_000;
const MAX_SWEEP_KEYS = 100_000;

/**
 * Reads newly committed lifecycle events in log order and hands them to the listeners of their organization.
 * Guarantees, for a listener registered at frontier F: every event committed in the log after F reaches it
 * exactly once, through `deliver` in log order (or, after `catchUp`, through its own reads of the log), or through
 * `deliverLate` when its transaction committed after the frontier passed it — unless that was more than the late
 * window after its `occurred_at`. Idle (no listener) it reads nothing and holds no timer.
 */
export class LifecycleFeed {
  private readonly listeners = new Map<string, OrganizationListeners>();
  private listenerCount = 0;
  private position: LogPosition;
  private active = false;
  private closed = false;
  private readonly batchSize: number;
  private pollTimer: ReturnType<typeof setInterval> | undefined;
  private pollsSinceSweep = 0;
  private sweepDue = false;
  private wakeTimer: ReturnType<typeof setTimeout> | undefined;
  private wakeDue = Number.POSITIVE_INFINITY;
  /** Due times (ms) of signals not yet covered by a read, ascending. */
  private readonly dueTimes: number[] = [];
  /** Events handed out during the late window: id -> occurred_at (ms). */
  private readonly handedOut = new Map<string, number>();
  /** Per organization with listeners: the position after which the feed has read every event it committed. */
  private readonly coveredSince = new Map<string, LogPosition>();
  private reading: Promise<void> | undefined;
  private readAgain = false;
  private lateEvents = 0;
  private readonly stopSignals: () => void;

  constructor(
    private readonly store: LifecycleFeedStore,
    signals: CommitSignals,
    private readonly clock: Clock,
    private readonly options: LifecycleFeedOptions,
    private readonly log: FeedLog,
  ) {
    this.batchSize = options.batchSize ?? 1_000;
    this.position = this.settledPosition();
    this.stopSignals = signals.onSignal((signal) => this.onSignal(signal));
  }

  /** Everything up to here has been handed to the listeners. */
  get frontier(): LogPosition {
    return this.position;
  }

  get lateWindowMs(): number {
    return this.options.lateWindowMs;
  }

  stats(): LifecycleFeedStats {
    return { listeners: this.listenerCount, lateEvents: this.lateEvents };
  }

  /** Starts delivering to `listener`; returns the frontier it starts after. Synchronous, so nothing slips between. */
  register(listener: FeedListener): LogPosition {
    if (this.closed) throw new Error("the lifecycle feed is closed");
    if (!this.active) this.activate();
    let group = this.listeners.get(listener.organizationId);
    if (!group) {
      group = { all: new Set(), byReference: new Map(), size: 0 };
      this.listeners.set(listener.organizationId, group);
    }
    if (listener.referenceId === undefined) group.all.add(listener);
    else {
      let set = group.byReference.get(listener.referenceId);
      if (!set) group.byReference.set(listener.referenceId, (set = new Set()));
      set.add(listener);
    }
    group.size++;
    this.listenerCount++;
    return this.position;
  }

  unregister(listener: FeedListener): void {
    const group = this.listeners.get(listener.organizationId);
    if (!group) return;
    let removed: boolean;
    if (listener.referenceId === undefined) removed = group.all.delete(listener);
    else {
      const set = group.byReference.get(listener.referenceId);
      removed = set?.delete(listener) ?? false;
      if (set?.size === 0) group.byReference.delete(listener.referenceId);
    }
    if (!removed) return;
    group.size--;
    this.listenerCount--;
    if (group.size === 0) {
      this.listeners.delete(listener.organizationId);
      this.coveredSince.delete(listener.organizationId);
    }
    if (this.listenerCount === 0) this.deactivate();
  }

  /** Stops reading, ends every listener, and waits for a read in progress. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopSignals();
    const listeners = [...this.listeners.values()].flatMap(listenersOf);
    this.listeners.clear();
    this.listenerCount = 0;
    this.deactivate();
    for (const listener of listeners) listener.end();
    await this.reading;
  }

  /** Reads the log now (or as soon as the read in progress ends); resolves once it has read up to the clock. */
  requestRead(): Promise<void> {
    if (!this.active) return Promise.resolve();
    if (this.reading) {
      this.readAgain = true;
      return this.reading;
    }
    this.reading = this.readLoop().finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  private activate(): void {
    this.active = true;
    // Nobody listened while idle, so nothing between the old frontier and now needs handing out.
    const settled = this.settledPosition();
    if (comparePositions(settled, this.position) > 0) this.position = settled;
    this.pollTimer = setInterval(() => {
      if (++this.pollsSinceSweep >= POLLS_PER_SWEEP) this.sweepDue = true;
      void this.requestRead();
    }, this.options.pollIntervalMs);
    this.pollTimer.unref();
  }

  private deactivate(): void {
    this.active = false;
    clearInterval(this.pollTimer);
    clearTimeout(this.wakeTimer);
    this.pollTimer = undefined;
    this.wakeTimer = undefined;
    this.wakeDue = Number.POSITIVE_INFINITY;
    this.dueTimes.length = 0;
    this.handedOut.clear();
    this.coveredSince.clear();
    this.sweepDue = false;
  }

  /** The newest position the feed may read up to now: the clock minus the settle delay. */
  private settledPosition(): LogPosition {
    return { occurredAt: new Date(this.clock.now().getTime() - this.options.settleDelayMs), id: MAX_EVENT_ID };
  }

  private onSignal(signal: CommitSignal | null): void {
    if (!this.active) return;
    if (signal === null) {
      this.sweepDue = true;
      void this.requestRead();
      return;
    }
    if (!this.listeners.has(signal.organizationId)) return;
    if (signal.earliest.getTime() <= this.position.occurredAt.getTime()) {
      // Committed after the feed passed (some of) these events: sweep for them now.
      this.sweepDue = true;
      void this.requestRead();
    }
    const due = signal.latest.getTime() + this.options.settleDelayMs;
    const last = this.dueTimes.at(-1);
    // Kept ascending; signals a few milliseconds apart share one read.
    if (last === undefined || due > last + 5) this.dueTimes.push(Math.max(due, last ?? due));
    this.scheduleWake();
  }

  private scheduleWake(): void {
    const due = this.dueTimes[0];
    if (due === undefined || !this.active) return;
    if (this.wakeTimer && this.wakeDue <= due) return;
    clearTimeout(this.wakeTimer);
    // Never wait longer than the poll interval: with a clock far ahead of the signal's, the poll reads anyway.
    const delay = Math.min(Math.max(0, due - this.clock.now().getTime()), this.options.pollIntervalMs);
    this.wakeDue = due;
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = undefined;
      this.wakeDue = Number.POSITIVE_INFINITY;
      void this.requestRead();
    }, delay);
    this.wakeTimer.unref();
  }

  private async readLoop(): Promise<void> {
    try {
      do {
        this.readAgain = false;
        if (!this.active) return;
        const until = this.settledPosition();
        if (comparePositions(until, this.position) > 0) {
          const organizationIds = [...this.listeners.keys()];
          const rows = await this.store.listEventsInRange({
            ...(organizationIds.length <= MAX_ORGANIZATIONS_PER_QUERY && { organizationIds }),
            after: this.position,
            until,
            limit: this.batchSize,
          });
          const full = rows.length === this.batchSize;
          this.advance(rows, full ? positionOf(rows.at(-1)!) : until, new Set(organizationIds));
          if (full) this.readAgain = true;
        }
        if (!this.readAgain && this.sweepDue) await this.sweep();
      } while (this.readAgain);
    } catch (error) {
      // The frontier did not move: the next poll reads the same range again.
      this.log.error({ err: error }, "reading the lifecycle log for live subscriptions failed");
    } finally {
      this.settleDueTimes();
    }
  }

  /**
   * Moves the frontier to `reached` and hands out `rows` (the log in (old frontier, reached]). Listeners of an
   * organization the read did not cover registered while it ran: they catch up from the log.
   */
  private advance(rows: readonly LifecycleEvent[], reached: LogPosition, covered: ReadonlySet<string>): void {
    const from = this.position;
    if (comparePositions(reached, from) <= 0) return;
    this.position = reached;
    // A read that named no organization covered them all.
    const coveredAll = covered.size > MAX_ORGANIZATIONS_PER_QUERY;
    const uncovered: FeedListener[] = [];
    for (const [organizationId, group] of this.listeners) {
      if (coveredAll || covered.has(organizationId)) {
        if (!this.coveredSince.has(organizationId)) this.coveredSince.set(organizationId, from);
      } else uncovered.push(...listenersOf(group));
    }
    const fresh = rows.filter((event) => comparePositions(positionOf(event), from) > 0);
    for (const event of fresh) this.handedOut.set(event.id, event.occurredAt.getTime());
    this.forgetBefore(reached.occurredAt.getTime() - this.options.lateWindowMs - LATE_WINDOW_MARGIN_MS);
    this.dispatch(fresh, (listener, batch) => listener.deliver(batch));
    for (const listener of uncovered) listener.catchUp(reached);
  }

  /**
   * Looks for events in the late window that no listener received, and hands them out. Those are events that
   * committed after the frontier passed them, and events from before the feed covered their organization, which
   * its listeners read themselves while replaying, unless they committed after that read: the listeners sort
   * them out (they remember what they replayed). Only the first kind counts as late in the statistics.
   */
  private async sweep(): Promise<void> {
    this.sweepDue = false;
    this.pollsSinceSweep = 0;
    const earliestStart = new Map<string, LogPosition>();
    for (const [organizationId, group] of this.listeners) {
      let earliest: LogPosition | undefined;
      for (const listener of listenersOf(group)) {
        if (!earliest || comparePositions(listener.start, earliest) < 0) earliest = listener.start;
      }
      if (earliest) earliestStart.set(organizationId, earliest);
    }
    const organizationIds = [...earliestStart.keys()];
    if (organizationIds.length === 0) return;
    const until = this.position;
    const keys = await this.store.listEventKeysInRange({
      ...(organizationIds.length <= MAX_ORGANIZATIONS_PER_QUERY && { organizationIds }),
      after: { occurredAt: new Date(until.occurredAt.getTime() - this.options.lateWindowMs), id: "" },
      until,
      limit: MAX_SWEEP_KEYS,
    });
    const missed = keys.filter((key) => {
      const start = earliestStart.get(key.organizationId);
      return start !== undefined && comparePositions(positionOf(key), start) > 0 && !this.handedOut.has(key.id);
    });
    if (missed.length === 0) return;
    const events = (await this.store.findEventsByIds(missed.map((key) => key.id)))
      .filter((event) => !this.handedOut.has(event.id))
      .sort((a, b) => comparePositions(positionOf(a), positionOf(b)));
    if (events.length === 0 || !this.active) return;
    for (const event of events) this.handedOut.set(event.id, event.occurredAt.getTime());
    const late = events.filter((event) => {
      const since = this.coveredSince.get(event.organizationId);
      return since !== undefined && comparePositions(positionOf(event), since) > 0;
    });
    if (late.length > 0) {
      this.lateEvents += late.length;
      this.log.warn(
        {
          events: late.length,
          maxLagMs: this.clock.now().getTime() - late[0]!.occurredAt.getTime(),
          settleDelayMs: this.options.settleDelayMs,
        },
        "lifecycle events committed after live subscriptions passed them; sent late, out of order (consider raising SUBSCRIPTION_SETTLE_DELAY)",
      );
    }
    this.dispatch(events, (listener, batch) => listener.deliverLate(batch));
  }

  /** Hands each event to the listeners of its organization (and reference), one batch per listener. */
  private dispatch(
    events: readonly LifecycleEvent[],
    hand: (listener: FeedListener, batch: LifecycleEvent[]) => void,
  ): void {
    const batches = new Map<FeedListener, LifecycleEvent[]>();
    const add = (listener: FeedListener, event: LifecycleEvent) => {
      const batch = batches.get(listener);
      if (batch) batch.push(event);
      else batches.set(listener, [event]);
    };
    for (const event of events) {
      const group = this.listeners.get(event.organizationId);
      if (!group) continue;
      for (const listener of group.all) add(listener, event);
      const byReference = group.byReference.get(event.referenceId);
      if (byReference) for (const listener of byReference) add(listener, event);
    }
    for (const [listener, batch] of batches) hand(listener, batch);
  }

  /** Forgets handed-out ids older than `cutoffMs` (the map is in hand-out order, which is nearly time order). */
  private forgetBefore(cutoffMs: number): void {
    for (const [id, occurredAtMs] of this.handedOut) {
      if (occurredAtMs >= cutoffMs) break;
      this.handedOut.delete(id);
    }
  }

  private settleDueTimes(): void {
    const reached = this.position.occurredAt.getTime() + this.options.settleDelayMs;
    while (this.dueTimes.length > 0 && this.dueTimes[0]! <= reached) this.dueTimes.shift();
    this.scheduleWake();
  }
}

function listenersOf(group: OrganizationListeners): FeedListener[] {
  return [...group.all, ...[...group.byReference.values()].flatMap((set) => [...set])];
}
