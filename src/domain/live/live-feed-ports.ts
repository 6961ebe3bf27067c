import type { LifecycleEvent, LifecycleEventType } from "../lifecycle/lifecycle-event.ts";
import type { LogPosition } from "./log-position.ts";

/*
 * The ports of the live feed (src/live/live-feed.ts): what it reads from the lifecycle log, implemented by the
 * store, and the commit signals that wake it and the webhook worker. Ports live in the domain so that the store
 * and the processes depend on the domain, never on each other.
 */

/** A lifecycle event with its place in the live order. */
export interface LiveEvent {
  readonly event: LifecycleEvent;
  readonly position: LogPosition;
}

/** Settled events after `after`, of some organizations (every organization when absent). */
export interface SettledReadQuery {
  readonly organizationIds?: readonly string[];
  readonly after: LogPosition;
  readonly limit: number;
}

export interface SettledRead {
  /** In live order, at most `limit`; no event can ever appear before the last of them. */
  readonly events: readonly LiveEvent[];
  /** Up to where the read saw every event of the organizations it read (at least the last event's position). */
  readonly reached: LogPosition;
}

/** A range `(after, until]` of one organization's log with a subscription's filters, at most `limit` events. */
export interface ReplayQuery {
  readonly organizationId: string;
  readonly after: LogPosition;
  readonly until: LogPosition;
  /** Skip events that occurred before this (retention). */
  readonly notBefore: Date;
  readonly referenceId?: string;
  readonly types?: readonly LifecycleEventType[];
  readonly limit: number;
}

/** One organization's events after `after` with a reader's reference and type filters (the feed to poll). */
export interface FeedPageQuery {
  readonly organizationId: string;
  readonly after: LogPosition;
  /** Skip events that occurred before this (retention). */
  readonly notBefore: Date;
  readonly referenceId?: string;
  readonly types?: readonly LifecycleEventType[];
  /**
   * The reader's tag filters (StreamFilter's, at least one of / none of), which a store may apply where the rows
   * are read: SQLite does, reading at most `limit` rows of the log and returning those that match; PostgreSQL
   * returns the rows and leaves them to the caller, which checks every event it is given anyway.
   */
  readonly tagIds?: readonly string[];
  readonly excludedTagIds?: readonly string[];
  readonly limit: number;
}

export interface FeedPageRead {
  /** In live order, at most `limit`. */
  readonly events: readonly LiveEvent[];
  /** The end of the settled log in the same snapshot as the events: none can appear at or before it later. */
  readonly end: LogPosition;
  /**
   * Set when the read stopped before the end of the log with fewer than `limit` events (it reads a bounded part of
   * the log, see src/store/sql/live-log-store.ts): everything up to here was read; the next read starts here.
   * Absent: a page shorter than `limit` reached the end of the log.
   */
  readonly stoppedAt?: LogPosition;
  /** Rows of the log the read went through (at least its events): what the feed's scan bound counts. */
  readonly rowsRead: number;
}

/** What the feed to poll reads (implemented in src/store/sql/live-log-store.ts). */
export interface FeedLogStore {
  /** A page of the log and the end of the settled log, in one statement (one snapshot). */
  readFeedPage(query: FeedPageQuery): Promise<FeedPageRead>;
  findPosition: LiveLogStore["findPosition"];
  findSettledEnd: LiveLogStore["findSettledEnd"];
}

/** What the live side reads from persistence (implemented in src/store/sql/live-log-store.ts). */
export interface LiveLogStore {
  readSettled(query: SettledReadQuery): Promise<SettledRead>;
  /** The end of the settled log now: every event up to it is readable and none can appear before it. */
  findSettledEnd(): Promise<LogPosition>;
  /** Call only with `until` at or before a position the feed has read up to (so the range is settled). */
  readRange(query: ReplayQuery): Promise<LiveEvent[]>;
  /** Where an event of the organization sits in the live order; null when it does not exist (any more). */
  findPosition(organizationId: string, eventId: string): Promise<LogPosition | null>;
}

/** An organization id: "it committed events"; null: "signals may have been missed, read now". */
export type CommitSignalListener = (organizationId: string | null) => void;

/** Commit signals across the instances that share a database (implemented in src/store/signals/commit-signals.ts). */
export interface CommitSignals {
  /**
   * Call after the transaction that wrote `events` committed. Never throws; delivery is best effort. (Where the
   * database signals its commits itself, as PostgreSQL does here, this does nothing.)
   */
  publish(events: readonly LifecycleEvent[]): void;
  /**
   * Whether signals also tell of commits made by other processes (PostgreSQL's NOTIFY). In-process signals only
   * repeat this process's own commits, which its commit listeners have already heard.
   */
  readonly crossProcess: boolean;
  onSignal(listener: CommitSignalListener): () => void;
  close(): Promise<void>;
}

/**
 * Live events of one organization as they commit, for a reader that waits for the next one (a long poll of the
 * feed): implemented by the live feed (src/live/event-waiters.ts), woken by the commit signals, so that waiting
 * costs no statement of its own.
 */
export interface LiveEventWaiters {
  /**
   * Starts waiting for the organization's events (of `referenceId` only, when given) after `after`, which the
   * reader has read up to; `end` is the end of the settled log as the reader's last read saw it.
   */
  open(organizationId: string, referenceId: string | undefined, after: LogPosition, end: LogPosition): LiveEventWaiting;
}

/** One reader's wait; close it when done. */
export interface LiveEventWaiting {
  /**
   * Resolves with the next events, in live order, after everything handed out or skipped; with "read" when events
   * may have passed unseen (read the log from your position, then `skipTo`); with "ended" when `signal` aborted or
   * the feed stopped.
   */
  next(signal: AbortSignal): Promise<readonly LiveEvent[] | "read" | "ended">;
  /** The reader read the log up to `position` itself: events at or before it are not handed out. */
  skipTo(position: LogPosition): void;
  close(): void;
}
