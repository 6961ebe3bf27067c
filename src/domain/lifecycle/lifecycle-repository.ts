import type { TaggedReference } from "../models.ts";
import type { LifecycleEvent, LifecycleEventType } from "./lifecycle-event.ts";

/*
 * What the lifecycle log needs from persistence, implemented in src/store/sql/lifecycle-repository.ts.
 * Reached as `store.lifecycle` of a `Store`: inside `store.transaction` it writes in that transaction, and the
 * events it inserts are handed to the unit of work, which publishes them once committed.
 */

export interface EventListQuery {
  readonly referenceId: string;
  readonly types?: readonly LifecycleEventType[];
  readonly from?: Date;
  readonly to?: Date;
  readonly notBefore: Date;
  readonly order: "asc" | "desc";
  /** keyset: exclusive position in (occurred_at, id) order, in the direction of `order` */
  readonly after?: { readonly occurredAt: Date; readonly id: string };
  readonly limit: number;
  /**
   * Leaves the events' tag snapshots unread: each event's `referenceTags` is TAG_SNAPSHOTS_NOT_READ. The snapshot
   * is about a third of an event's bytes, and on PostgreSQL most of the cost of building a page as JSON.
   */
  readonly withoutTagSnapshots?: boolean;
}

/** A reference and one page of its lifecycle log, read together. */
export interface ReferenceWithEvents {
  readonly reference: TaggedReference;
  readonly events: readonly LifecycleEvent[];
}

export interface LifecycleRepository {
  insertEvent(event: LifecycleEvent): Promise<void>;
  /** The organization's events among `ids` that occurred at or after `notBefore` (retention). */
  findEventsByIds(organizationId: string, ids: readonly string[], notBefore: Date): Promise<LifecycleEvent[]>;
  listEvents(query: EventListQuery): Promise<LifecycleEvent[]>;
  /**
   * `listEvents` for a reference of the organization, checked in the same statement: null when the
   * organization has no such reference.
   */
  listEventsOfReference(organizationId: string, query: EventListQuery): Promise<LifecycleEvent[] | null>;
  /**
   * A reference of the organization with its tags and a page of its events (`query`), in one statement: null
   * when the organization has no such reference.
   */
  findReferenceWithEvents(organizationId: string, query: EventListQuery): Promise<ReferenceWithEvents | null>;
  /** Deletes at most `batchSize` events that occurred before `cutoff`; returns how many it deleted. */
  deleteEventsBefore(cutoff: Date, batchSize: number): Promise<number>;
  /**
   * Makes sure the log can take events of the months of `instants` at once: PostgreSQL keeps one partition per
   * month (migration 0016) and makes a missing one on demand, which costs the insert that finds it missing a
   * second run; made ahead, no insert meets that. Nothing to do on SQLite.
   */
  prepareMonths(instants: readonly Date[]): Promise<void>;
  /**
   * PostgreSQL: drops every whole month of the log before `cutoff` (its partition, in one statement each) and
   * returns the events it held. Null on SQLite, whose log is pruned by rows (`deleteEventsBefore`).
   */
  dropMonthsBefore(cutoff: Date): Promise<number | null>;

  // ---------------------------------------------------------------------------------------------------------
  // Set-wise writes (bulk ingestion): each method costs a fixed number of statements whatever the number of
  // rows, except that a multi-row statement is cut in chunks past the database's bound-parameter limit.
  // ---------------------------------------------------------------------------------------------------------

  /**
   * Inserts events in one multi-row statement, in the order given (their log positions follow it), and hands
   * them to the unit of work like `insertEvent`, so they are published once committed.
   */
  insertEvents(events: readonly LifecycleEvent[]): Promise<void>;
}
