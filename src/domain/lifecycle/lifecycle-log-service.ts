import type { Clock } from "../shared/clock.ts";
import type { CursorCodec } from "../shared/cursor.ts";
import { DomainError, notFound } from "../shared/errors.ts";
import { isUuid } from "../shared/ids.ts";
import { pageOf, type Page } from "../shared/page.ts";
import type { TaggedReference } from "../models.ts";
import type { Store } from "../store.ts";
import type { EventListQuery } from "./lifecycle-repository.ts";
import {
  isLifecycleEventType,
  LIFECYCLE_EVENT_TYPES,
  type LifecycleEvent,
  type LifecycleEventType,
} from "./lifecycle-event.ts";

export interface ListEventsInput {
  readonly types?: readonly string[];
  readonly from?: Date;
  readonly to?: Date;
  /** The listing's order: part of what a cursor was issued for, like the filters. */
  readonly order?: "asc" | "desc";
  /**
   * Read the listing backward from the cursor (the items before it, nearest first), as a Relay `last`/`before`
   * page does. Not part of what a cursor was issued for: any cursor of a listing works in both directions.
   */
  readonly backward?: boolean;
  readonly limit: number;
  readonly cursor?: string;
}

/** A first page of a reference's whole log: what `getReferenceWithFirstEvents` takes of ListEventsInput. */
export type FirstEventsInput = Pick<ListEventsInput, "order" | "backward" | "limit"> & {
  /** false: the events' tag snapshots are not read (see EventListQuery.withoutTagSnapshots). */
  readonly tagSnapshots?: boolean;
};

/** The keyset position inside an event cursor: `occurred_at` (ISO) and id. Also read by live subscriptions. */
export type EventPosition = { readonly t: string; readonly i: string };
export const isEventPosition = (value: unknown): value is EventPosition =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as EventPosition).t === "string" &&
  !Number.isNaN(Date.parse((value as EventPosition).t)) &&
  isUuid((value as EventPosition).i);

/**
 * Reads the lifecycle log in `(occurred_at, id)` order with keyset cursors, which stay valid while
 * new events arrive. Events older than the retention window are never returned, even before the pruning job
 * has deleted them.
 */
export class LifecycleLogService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly cursors: CursorCodec,
    private readonly retentionMonths: number,
  ) {}

  /** The oldest `occurred_at` still inside the retention window: now minus N calendar months. */
  retentionCutoff(): Date {
    const cutoff = new Date(this.clock.now());
    const day = cutoff.getUTCDate();
    cutoff.setUTCDate(1);
    cutoff.setUTCMonth(cutoff.getUTCMonth() - this.retentionMonths);
    // Clamp 31 August minus 18 months to the last day of February rather than rolling into March.
    const lastDay = new Date(Date.UTC(cutoff.getUTCFullYear(), cutoff.getUTCMonth() + 1, 0)).getUTCDate();
    cutoff.setUTCDate(Math.min(day, lastDay));
    return cutoff;
  }

  /**
   * One page of a reference's log.
   * @throws NOT_FOUND, INVALID_EVENT_TYPE (message lists the valid types), INVALID_RANGE (`from` after `to`),
   *         INVALID_CURSOR, CURSOR_FILTER_MISMATCH.
   */
  async listEvents(organizationId: string, referenceId: string, input: ListEventsInput): Promise<Page<LifecycleEvent>> {
    const types = [...new Set(input.types ?? [])];
    const unknown = types.filter((type) => !isLifecycleEventType(type));
    if (unknown.length > 0) {
      throw new DomainError(
        "INVALID_EVENT_TYPE",
        `Unknown event type ${unknown.map((t) => `"${t}"`).join(", ")}; valid types are ${LIFECYCLE_EVENT_TYPES.join(", ")}`,
        [
          {
            path: ["type"],
            code: "INVALID_EVENT_TYPE",
            message: `valid types are ${LIFECYCLE_EVENT_TYPES.join(", ")}`,
          },
        ],
      );
    }
    if (input.from && input.to && input.from > input.to) {
      throw new DomainError("INVALID_RANGE", "from must not be after to", [
        { path: ["from"], code: "INVALID_RANGE", message: "from is after to" },
      ]);
    }
    if (!isUuid(referenceId)) throw notFound("reference");
    const { query, filters, after } = this.eventQuery(referenceId, types as LifecycleEventType[], input);
    // The reference's existence and its page of events, in one statement.
    const rows = await this.store.lifecycle.listEventsOfReference(organizationId, query);
    if (rows === null) throw notFound("reference");
    return pageOf(rows, input.limit, (event) => this.cursorFor(event, filters), after !== undefined);
  }

  /**
   * A reference with its tags and the first page of its whole log (no filter, no cursor), in one statement: on
   * PostgreSQL, one round trip where reading the reference and then its events takes two. The page is the one
   * `listEvents` gives for the same input, cursors included. Only input that `listEvents` cannot refuse is
   * taken, so every error here is the reference's own.
   * @throws NOT_FOUND
   */
  async getReferenceWithFirstEvents(
    organizationId: string,
    referenceId: string,
    input: FirstEventsInput,
  ): Promise<{ reference: TaggedReference; events: Page<LifecycleEvent> }> {
    if (!isUuid(referenceId)) throw notFound("reference");
    const { query, filters } = this.eventQuery(referenceId, [], input);
    const found = await this.store.lifecycle.findReferenceWithEvents(organizationId, {
      ...query,
      withoutTagSnapshots: input.tagSnapshots === false,
    });
    if (found === null) throw notFound("reference");
    return {
      reference: found.reference,
      events: pageOf(found.events, input.limit, (event) => this.cursorFor(event, filters), false),
    };
  }

  /** The repository's query for a page of a reference's log, and what its cursors are issued for. */
  private eventQuery(
    referenceId: string,
    types: LifecycleEventType[],
    input: ListEventsInput,
  ): { query: EventListQuery; filters: object; after: EventPosition | undefined } {
    const id = referenceId.toLowerCase();
    const order = input.order ?? "asc";
    const filters = {
      scope: "events",
      referenceId: id,
      types: types.sort(),
      from: input.from?.toISOString(),
      to: input.to?.toISOString(),
      order,
    };
    const after = input.cursor ? this.cursors.decode(input.cursor, filters, isEventPosition) : undefined;
    const query: EventListQuery = {
      referenceId: id,
      types,
      from: input.from,
      to: input.to,
      notBefore: this.retentionCutoff(),
      order: input.backward ? (order === "asc" ? "desc" : "asc") : order,
      after: after && { occurredAt: new Date(after.t), id: after.i },
      limit: input.limit + 1,
    };
    return { query, filters, after };
  }

  /** Makes the log's months around now ahead of the events that will need them (see prepareMonths). */
  async prepareMonths(): Promise<void> {
    const now = this.clock.now();
    await this.store.lifecycle.prepareMonths([-1, 0, 1, 2].map((offset) => addUtcMonths(now, offset)));
  }

  /**
   * Removes events past retention; returns how many were removed (PostgreSQL: the catalog's estimate of what the
   * dropped months held, since counting them would read them whole). PostgreSQL drops each whole month before the
   * cutoff (a partition: fast whatever its size, and its space goes back at once); the month that straddles the
   * cutoff stays until it is wholly past, its older rows hidden by every read (`notBefore`). SQLite deletes rows
   * in batches, each its own short statement, so writers are never locked out for long. Either way the months
   * ahead are made first.
   */
  async pruneExpiredEvents(batchSize = 1_000, maxBatches = Number.POSITIVE_INFINITY): Promise<number> {
    const cutoff = this.retentionCutoff();
    await this.prepareMonths();
    const dropped = await this.store.lifecycle.dropMonthsBefore(cutoff);
    if (dropped !== null) return dropped;
    let total = 0;
    for (let batch = 0; batch < maxBatches; batch++) {
      // Each batch is its own short statement, so writers are never locked out for long; and a pause after it, so
      // that a writer of another process waiting for SQLite's lock gets it: back to back, the batches took the lock
      // again at once, and a writer polling for it waited for the whole prune (10 s, at 10^6 events).
      const deleted = await this.store.lifecycle.deleteEventsBefore(cutoff, batchSize);
      total += deleted;
      if (deleted < batchSize) break;
      await new Promise((resolve) => setTimeout(resolve, PAUSE_BETWEEN_BATCHES_MS));
    }
    return total;
  }

  private cursorFor(event: LifecycleEvent, filters: object): string {
    return this.cursors.encode<EventPosition>({ t: event.occurredAt.toISOString(), i: event.id }, filters);
  }
}

/**
 * SQLite: the pause after each batch of a prune, longer than the longest sleep of SQLite's busy handler between
 * two tries (100 ms), so that a writer waiting in another process takes the lock before the next batch.
 */
const PAUSE_BETWEEN_BATCHES_MS = 120;

/** The first instant of the UTC month `offset` months from `instant`'s. */
function addUtcMonths(instant: Date, offset: number): Date {
  return new Date(Date.UTC(instant.getUTCFullYear(), instant.getUTCMonth() + offset, 1));
}
