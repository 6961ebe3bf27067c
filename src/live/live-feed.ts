import type { CommitSignals, LiveEvent, LiveLogStore, SettledRead } from "../domain/live/live-feed-ports.ts";
import { comparePositions, laterOf, LOG_START, type LogPosition } from "../domain/live/log-position.ts";
import { runInBackground } from "../domain/shared/background-work.ts";

/*
 * The live side of the lifecycle log: one feed per process reads the log in live order (see
 * src/domain/live/log-position.ts) from its frontier and hands each event to the live subscriptions (listeners)
 * of its organization. What it reads through and wakes on are ports in src/domain/live/live-feed-ports.ts, implemented
 * by the store. It reads when woken by a commit signal and at least every poll interval as a safety net, so a
 * lost signal delays an event but never loses it. There is no settle delay and no waiting for other writers:
 * positions become visible in increasing order, so whatever a read returns can never be preceded later.
 */

/** One live subscription, as the feed sees it. */
export interface LiveListener {
  readonly organizationId: string;
  /** When set, only this reference's events are delivered (the feed indexes listeners by it). */
  readonly referenceId?: string;
  /**
   * True for a listener that reads the log itself at its own deadline (a long poll): it needs no safety-net
   * reads, so listeners of this kind alone leave the feed without a timer, reading only when signalled.
   */
  readonly withoutSafetyNet?: boolean;
  /** Events of the listener's organization (and reference), in live order, all after its registration frontier. */
  deliver(events: readonly LiveEvent[]): void;
  /** The feed moved to `frontier` without reading this listener's organization: it reads the log up to there. */
  catchUp(frontier: LogPosition): void;
  /** The feed stopped; no more events will come. */
  end(): void;
}

export interface LiveFeedLog {
  error(details: object, message: string): void;
}

export interface LiveFeedOptions {
  /** The safety net: how often the feed reads with no signal. */
  readonly pollIntervalMs: number;
  /** Events per read of the log; a larger backlog is read in several steps. */
  readonly batchSize?: number;
}

interface OrganizationListeners {
  /** Listeners of every event of the organization (no reference filter). */
  readonly all: Set<LiveListener>;
  readonly byReference: Map<string, Set<LiveListener>>;
  size: number;
}

// The feed names the organizations it reads; past this many it reads every organization's events instead.
const MAX_ORGANIZATIONS_PER_QUERY = 200;

/**
 * Reads settled lifecycle events in live order and hands them to the listeners of their organization.
 * Guarantee, for a listener registered at frontier F: every event after F reaches it exactly once, in live
 * order, through `deliver` (or, after `catchUp`, through its own reads of the log). Idle (no listener) it reads
 * nothing and holds no timer.
 */
export class LiveFeed {
  private readonly listeners = new Map<string, OrganizationListeners>();
  private listenerCount = 0;
  /** Listeners that want the safety-net reads (see LiveListener.withoutSafetyNet). */
  private safetyNetCount = 0;
  private position: LogPosition | undefined;
  private active = false;
  private isClosed = false;
  private readonly batchSize: number;
  private pollTimer: ReturnType<typeof setInterval> | undefined;
  private reading: Promise<void> | undefined;
  private readAgain = false;
  private readonly stopSignals: () => void;

  constructor(
    private readonly store: LiveLogStore,
    signals: CommitSignals,
    private readonly options: LiveFeedOptions,
    private readonly log: LiveFeedLog,
  ) {
    this.batchSize = options.batchSize ?? 1_000;
    this.stopSignals = signals.onSignal((organizationId) => {
      if (organizationId === null || this.listeners.has(organizationId)) void this.requestRead();
    });
  }

  /** Everything up to here has been handed to the listeners (the start of the log before the first read). */
  get frontier(): LogPosition {
    return this.position ?? LOG_START;
  }

  /** True once {@link close} was called: listeners can no longer register. */
  get closed(): boolean {
    return this.isClosed;
  }

  /** Open listeners. */
  get size(): number {
    return this.listenerCount;
  }

  /**
   * Makes sure the feed knows where the settled log ends before a listener registers, so that it does not read
   * what was written while it was idle. Registering without it is correct, only slower.
   */
  async prepare(): Promise<void> {
    if (this.active || this.isClosed) return;
    this.prepareAt(await this.store.findSettledEnd());
  }

  /** {@link prepare} with an end of the settled log the caller has just read (a snapshot's): no statement. */
  prepareAt(end: LogPosition): void {
    // Checked here, after prepare's wait: a listener that registered meanwhile (after a `prepare` answered
    // sooner) is owed every event after the frontier it got, and this end may lie past some of them.
    if (this.active || this.isClosed) return;
    this.position = this.position ? laterOf(this.position, end) : end;
  }

  /** Starts delivering to `listener`; returns the frontier it starts after. Synchronous, so nothing slips between. */
  register(listener: LiveListener): LogPosition {
    if (this.isClosed) throw new Error("the live feed is closed");
    if (!this.active) this.activate();
    if (!listener.withoutSafetyNet && this.safetyNetCount++ === 0) this.startPolling();
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
    return this.frontier;
  }

  unregister(listener: LiveListener): void {
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
    if (!listener.withoutSafetyNet && --this.safetyNetCount === 0) this.stopPolling();
    if (group.size === 0) this.listeners.delete(listener.organizationId);
    if (this.listenerCount === 0) this.deactivate();
  }

  /** Stops reading, ends every listener, and waits for a read in progress. */
  async close(): Promise<void> {
    if (this.isClosed) return;
    this.isClosed = true;
    this.stopSignals();
    const listeners = [...this.listeners.values()].flatMap(listenersOf);
    this.listeners.clear();
    this.listenerCount = 0;
    this.safetyNetCount = 0;
    this.deactivate();
    for (const listener of listeners) listener.end();
    await this.reading;
  }

  /** Reads the log now (or as soon as the read in progress ends). */
  requestRead(): Promise<void> {
    if (!this.active) return Promise.resolve();
    if (this.reading) {
      this.readAgain = true;
      return this.reading;
    }
    // Shared by every listener, and often set off by a request (its commit's signal, a subscription or long poll
    // starting): the reads are background work, never a request's (src/domain/shared/background-work.ts).
    this.reading = runInBackground(() => this.readLoop())
      .catch((error: unknown) => {
        // The next signal or poll reads again from the same frontier: nothing is lost.
        this.log.error({ err: error }, "reading the lifecycle log for live subscriptions failed");
      })
      .finally(() => {
        this.reading = undefined;
      });
    return this.reading;
  }

  private activate(): void {
    this.active = true;
  }

  private startPolling(): void {
    this.pollTimer = setInterval(() => void this.requestRead(), this.options.pollIntervalMs);
    this.pollTimer.unref();
  }

  private stopPolling(): void {
    clearInterval(this.pollTimer);
    this.pollTimer = undefined;
  }

  private deactivate(): void {
    this.active = false;
    this.stopPolling();
    // Idle, the frontier goes stale: `prepare` moves it to the end of the log before the next listener.
  }

  private async readLoop(): Promise<void> {
    do {
      this.readAgain = false;
      if (!this.active) return;
      const organizationIds = [...this.listeners.keys()];
      const covered = new Set(organizationIds);
      const from = this.frontier;
      const read = await this.store.readSettled({
        ...(organizationIds.length <= MAX_ORGANIZATIONS_PER_QUERY && { organizationIds }),
        after: from,
        limit: this.batchSize,
      });
      if (!this.active) return;
      this.advance(read, from, organizationIds.length > MAX_ORGANIZATIONS_PER_QUERY ? null : covered);
      if (read.events.length === this.batchSize) this.readAgain = true;
    } while (this.readAgain);
  }

  /**
   * Moves the frontier to what the read reached and hands out its events. Listeners of an organization the read
   * did not cover (registered while it ran) catch up from the log; `covered` null means every organization.
   */
  private advance(read: SettledRead, from: LogPosition, covered: ReadonlySet<string> | null): void {
    // A read that started before the feed went idle and woke again may end behind the new frontier.
    const current = this.frontier;
    if (comparePositions(read.reached, current) <= 0) return;
    this.position = read.reached;
    const fresh =
      comparePositions(current, from) === 0
        ? read.events
        : read.events.filter((live) => comparePositions(live.position, current) > 0);
    const uncovered: LiveListener[] = [];
    if (covered) {
      for (const [organizationId, group] of this.listeners) {
        if (!covered.has(organizationId)) uncovered.push(...listenersOf(group));
      }
    }
    this.dispatch(fresh);
    for (const listener of uncovered) listener.catchUp(read.reached);
  }

  /** Hands each event to the listeners of its organization (and reference), one batch per listener. */
  private dispatch(events: readonly LiveEvent[]): void {
    const batches = new Map<LiveListener, LiveEvent[]>();
    const add = (listener: LiveListener, event: LiveEvent) => {
      const batch = batches.get(listener);
      if (batch) batch.push(event);
      else batches.set(listener, [event]);
    };
    for (const live of events) {
      const group = this.listeners.get(live.event.organizationId);
      if (!group) continue;
      for (const listener of group.all) add(listener, live);
      const byReference = group.byReference.get(live.event.referenceId);
      if (byReference) for (const listener of byReference) add(listener, live);
    }
    for (const [listener, batch] of batches) listener.deliver(batch);
  }
}

function listenersOf(group: OrganizationListeners): LiveListener[] {
  return [...group.all, ...[...group.byReference.values()].flatMap((set) => [...set])];
}
