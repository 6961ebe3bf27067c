import type { LifecycleEvent, LifecycleEventType } from "../lifecycle/lifecycle-event.ts";

/*
 * What recovery, replay and the ordering summary need from persistence (src/store/webhook-recovery-repository.ts),
 * reached as `store.webhookRecovery` so that it writes in the caller's transaction.
 */

/** A time window `[since, until)`. */
export interface TimeWindow {
  readonly since: Date;
  readonly until: Date;
}

/** Which events of the log a replay sends: the endpoint's filters as they are now, over a window. */
export interface ReplaySelection extends TimeWindow {
  readonly organizationId: string;
  /** null: every type. */
  readonly eventTypes: readonly LifecycleEventType[] | null;
  /** null: every reference; else events whose tag snapshot holds one of these tags (an empty list matches nothing). */
  readonly tagIds: readonly string[] | null;
}

/** A place in the log's (occurred_at, id) order. */
export interface LogPosition {
  readonly occurredAt: Date;
  readonly id: string;
}

/** An ordered endpoint's references whose deliveries wait behind an earlier one of theirs. */
export interface HeldBackSummary {
  /** References with at least one delivery held back. */
  readonly references: number;
  /** Deliveries held back, all references. */
  readonly deliveries: number;
  /** The oldest event held back (by the log's order), null when nothing is. */
  readonly oldest: {
    readonly deliveryId: string;
    readonly referenceId: string;
    readonly eventId: string;
    readonly eventType: LifecycleEventType;
    readonly occurredAt: Date;
  } | null;
}

/** A replay's remaining window (the row that lets any instance resume it). */
export interface ReplayJob {
  readonly endpointId: string;
  readonly organizationId: string;
  readonly since: Date;
  readonly until: Date;
  /** Events still to schedule (the count at the call, less those scheduled). */
  readonly remaining: number;
  /** The last event scheduled; null before the first batch. */
  readonly after: LogPosition | null;
}

/** What an endpoint's replay has left, for its read (its state follows from the endpoint's enabled flag). */
export interface ReplayStanding extends TimeWindow {
  /** At most this many events are still to be scheduled (the count at the call, less those scheduled). */
  readonly remaining: number;
}

/** Who schedules a replay now, and until when. */
export interface ReplayLease {
  readonly owner: string;
  readonly expiresAt: Date;
}

export interface WebhookRecoveryRepository {
  /** Stores a new replay leased to `lease.owner`; false when the endpoint has a replay already (one at a time). */
  startReplay(job: ReplayJob, lease: ReplayLease, at: Date): Promise<boolean>;
  /**
   * Leases one replay whose lease is free or expired at `now` (another instance's, stopped or dead, or one paused
   * by its endpoint's disabling), if any; the replays of disabled endpoints stay where they are (paused).
   */
  claimReplay(lease: ReplayLease, now: Date): Promise<ReplayJob | null>;
  /**
   * Moves the replay's cursor and renews its lease, or ends it (deletes the row) when nothing remains; false
   * when `lease.owner` no longer holds it (then the caller's transaction must not commit).
   */
  advanceReplay(endpointId: string, after: LogPosition | null, remaining: number, lease: ReplayLease): Promise<boolean>;
  /** Ends the replay held by `owner` (its window ran out early, or its endpoint can no longer be sent to). */
  endReplay(endpointId: string, owner: string): Promise<void>;
  /** Hands the replay's lease back (a stopping instance), so that the next instance to look resumes it at once. */
  releaseReplay(endpointId: string, owner: string): Promise<void>;
  /** The endpoint's replay, if it has one. */
  findReplay(endpointId: string): Promise<ReplayStanding | null>;
  /**
   * Holds the endpoint's row against changes until the caller's transaction ends, so that a replay chunk and a
   * change of the endpoint's filters or enabled state are one before the other (PostgreSQL; SQLite has one writer).
   */
  lockEndpointForReplay(endpointId: string): Promise<void>;

  /** Deliveries of the endpoint created in the window whose last attempt failed or that were given up. */
  countRecoverable(endpointId: string, window: TimeWindow, now: Date): Promise<number>;
  /**
   * Makes those deliveries due at `at` with a fresh retry schedule (their attempt count kept); returns how many.
   * On an ordered endpoint each takes its place in its reference's order again: it goes out before the later
   * pending deliveries of its reference, which wait behind it (SPEC 9.1). One statement, so the number is exactly
   * what was scheduled.
   */
  recover(endpointId: string, window: TimeWindow, at: Date): Promise<number>;
  /** Events of the selection, counted by the database. */
  countReplayable(selection: ReplaySelection): Promise<number>;
  /** Up to `limit` events of the selection after `after` (exclusive), oldest first. */
  replayableEvents(selection: ReplaySelection, after: LogPosition | null, limit: number): Promise<LifecycleEvent[]>;
  /** The endpoint's existing delivery of each of these events (event id -> delivery id). */
  findDeliveryIdsOfEvents(endpointId: string, eventIds: readonly string[]): Promise<Map<string, string>>;
  /**
   * Makes these deliveries due at `at` again with a fresh retry schedule, keeping their id (webhook-id), body
   * and attempt count. With `ordered`, each keeps its reference's order again (its ordering key is its event's reference).
   * A delivery in flight at `at` (leased, lease not expired) is due when its lease ends: the request being sent
   * ends before the replay's, never beside it.
   */
  requeueForReplay(deliveryIds: readonly string[], at: Date, ordered: boolean): Promise<void>;
  /**
   * Of these pending ordered deliveries, makes those whose reference has a later delivery in flight at `at` due
   * when that request's lease ends (a lease bounds a request), so that one reference never has two requests at once.
   */
  deferBehindInFlight(deliveryIds: readonly string[], at: Date): Promise<void>;
  /** How many of these deliveries are still pending. */
  countPending(deliveryIds: readonly string[]): Promise<number>;
  /** Drops the ordering of the endpoint's pending deliveries (its ordering was turned off). */
  releaseOrder(endpointId: string): Promise<number>;
  heldBack(endpointId: string): Promise<HeldBackSummary>;
}
