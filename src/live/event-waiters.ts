import type { LiveEvent, LiveEventWaiters, LiveEventWaiting } from "../domain/live/live-feed-ports.ts";
import { comparePositions, type LogPosition } from "../domain/live/log-position.ts";
import type { LiveFeed, LiveListener } from "./live-feed.ts";

/*
 * Long polls of the feed to poll (src/domain/live/event-feed-service.ts) wait on the live feed: each waiting poll
 * is a listener of its organization (and reference), so one read of the log per commit serves every poll
 * waiting for that organization, and a poll waits with no statement and no timer of its own. The feed reads
 * only when a commit signal names one of its organizations (LISTEN/NOTIFY on PostgreSQL: a commit through any
 * instance), and these listeners ask for no safety-net reads: a signal that is lost makes a poll wait until its
 * time is up, and its answer (an empty page with the cursor it had) makes the next poll read the log itself.
 */

/** Events a waiting poll may hold before it drops them and reads the log instead. */
const MAX_HELD_EVENTS = 1_000;

export class FeedEventWaiters implements LiveEventWaiters {
  constructor(private readonly feed: LiveFeed) {}

  open(
    organizationId: string,
    referenceId: string | undefined,
    after: LogPosition,
    end: LogPosition,
  ): LiveEventWaiting {
    this.feed.prepareAt(end);
    return new FeedWaiting(this.feed, organizationId, referenceId, after);
  }
}

class FeedWaiting implements LiveEventWaiting, LiveListener {
  readonly withoutSafetyNet = true;
  private position: LogPosition;
  private held: LiveEvent[] = [];
  private mustRead = false;
  private ended = false;
  private wake: (() => void) | undefined;

  constructor(
    private readonly feed: LiveFeed,
    readonly organizationId: string,
    readonly referenceId: string | undefined,
    after: LogPosition,
  ) {
    this.position = after;
    if (feed.closed) {
      // Shutting down: the poll answers at once with what it has.
      this.ended = true;
      return;
    }
    const frontier = feed.register(this);
    // The feed had read past where the poll read: what lies between reaches neither, so the poll reads it.
    if (comparePositions(frontier, after) > 0) this.mustRead = true;
  }

  deliver(events: readonly LiveEvent[]): void {
    for (const live of events) {
      if (comparePositions(live.position, this.position) <= 0) continue;
      if (this.held.length >= MAX_HELD_EVENTS) return this.catchUp();
      this.held.push(live);
    }
    if (this.held.length > 0) this.notify();
  }

  catchUp(): void {
    this.held = [];
    this.mustRead = true;
    this.notify();
  }

  end(): void {
    this.ended = true;
    this.notify();
  }

  async next(signal: AbortSignal): Promise<readonly LiveEvent[] | "read" | "ended"> {
    const stop = () => this.notify();
    signal.addEventListener("abort", stop, { once: true });
    try {
      for (;;) {
        if (this.ended || signal.aborted) return "ended";
        if (this.mustRead) {
          this.mustRead = false;
          return "read";
        }
        if (this.held.length > 0) {
          const events = this.held;
          this.held = [];
          this.position = events.at(-1)!.position;
          return events;
        }
        await new Promise<void>((resolve) => (this.wake = resolve));
      }
    } finally {
      signal.removeEventListener("abort", stop);
    }
  }

  skipTo(position: LogPosition): void {
    if (comparePositions(position, this.position) <= 0) return;
    this.position = position;
    this.held = this.held.filter((live) => comparePositions(live.position, position) > 0);
  }

  close(): void {
    this.ended = true;
    this.feed.unregister(this);
    this.notify();
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
