import {
  TAG_SNAPSHOTS_NOT_READ,
  type LifecycleEvent,
  type TagSnapshot,
} from "../../domain/lifecycle/lifecycle-event.ts";
import type {
  EventListQuery,
  LifecycleRepository,
  ReferenceWithEvents,
} from "../../domain/lifecycle/lifecycle-repository.ts";
import type { Database } from "../database.ts";
import { findInChunks } from "./in-chunks.ts";
import { dropLogMonthsBefore, ensureLogMonths, isMissingLogMonth, MissingLogMonthError } from "./log-months.ts";
import { chunksOf, fromJson, jsonParameter, toDate } from "./rows.ts";
import type { SqlExecutor } from "./executor.ts";
import { REFERENCE_COLUMN_COUNT, REFERENCE_COLUMNS, taggedReferenceFromValues } from "./reference-rows.ts";
import { Prisma } from "./sql-template.ts";
import { isOneOf } from "./value-lists.ts";
import { isUuid } from "../../domain/shared/ids.ts";
import { literalLimit } from "./literal-limit.ts";

/*
 * The lifecycle_events table. Built by the unit of work (src/store/sql/sql-store.ts) on its executor: inside
 * `store.transaction`, statements run in that transaction and the inserted events go to the unit's list, which
 * the unit publishes once it has committed.
 */

export interface EventRow {
  readonly id: string;
  readonly organization_id: string;
  readonly reference_id: string;
  readonly type: string;
  readonly occurred_at: unknown;
  readonly detail: unknown;
  readonly reference_tags: unknown;
}

/** An event row as the driver reads it on either database (see src/store/rows.ts). */
export function eventFromRow(row: EventRow): LifecycleEvent {
  return {
    id: row.id,
    organizationId: row.organization_id,
    referenceId: row.reference_id,
    type: row.type,
    occurredAt: toDate(row.occurred_at),
    detail: fromJson(row.detail),
    referenceTags: fromJson(row.reference_tags) as TagSnapshot[],
  } as unknown as LifecycleEvent;
}

const EVENT_COLUMN_NAMES = ["id", "organization_id", "reference_id", "type", "occurred_at", "detail", "reference_tags"];

/** The columns an event is read with, in this order (see `eventFromValues`). */
const EVENT_COLUMNS = Prisma.raw(EVENT_COLUMN_NAMES.map((column) => `e."${column}"`).join(", "));

/** EVENT_COLUMNS with NULL for the tag snapshot, in its place (EventListQuery.withoutTagSnapshots). */
const EVENT_COLUMNS_WITHOUT_TAGS = Prisma.raw(
  EVENT_COLUMN_NAMES.map((column) => (column === "reference_tags" ? `NULL AS "${column}"` : `e."${column}"`)).join(
    ", ",
  ),
);

/** The columns a page of `query` reads. */
function eventColumns(query: EventListQuery): Prisma.Sql {
  return query.withoutTagSnapshots ? EVENT_COLUMNS_WITHOUT_TAGS : EVENT_COLUMNS;
}

/** EVENT_COLUMNS of a subquery aliased `page`. */
const EVENT_PAGE_COLUMNS = Prisma.raw(EVENT_COLUMN_NAMES.map((column) => `page."${column}"`).join(", "));

/**
 * Reads the tag snapshots of one list of events. A reference's events mostly carry the same snapshot (it changes
 * only when the reference's tags do), so a text equal to the one before is not parsed again: those events share
 * one snapshot array, which every reader only reads (`readonly`). On SQLite that parsing was half of the row
 * conversion of an events page. PostgreSQL's driver hands the JSON over parsed already.
 */
function tagSnapshotReader(read = true): (value: unknown) => readonly TagSnapshot[] {
  if (!read) return () => TAG_SNAPSHOTS_NOT_READ;
  let lastText: string | undefined;
  let last: readonly TagSnapshot[] = [];
  return (value) => {
    if (typeof value !== "string") return value as TagSnapshot[];
    if (value !== lastText) {
      last = JSON.parse(value) as TagSnapshot[];
      lastText = value;
    }
    return last;
  };
}

/**
 * An event read as EVENT_COLUMNS' values (arrays cost the driver less to build than row objects; PostgreSQL's
 * JSON pages are arrays of the same values), its tag snapshot through `readTags`, made for the list the row
 * belongs to.
 */
function eventFromValues(row: unknown[], readTags: (value: unknown) => readonly TagSnapshot[]): LifecycleEvent {
  return {
    id: row[0],
    organizationId: row[1],
    referenceId: row[2],
    type: row[3],
    occurredAt: toDate(row[4]),
    detail: fromJson(row[5]),
    referenceTags: readTags(row[6]),
  } as unknown as LifecycleEvent;
}

/** Events read as EVENT_COLUMNS' values, one array of them each; their tag snapshots unread with `withoutTags`. */
function eventsFromValues(rows: readonly unknown[][], withoutTags = false): LifecycleEvent[] {
  const readTags = tagSnapshotReader(!withoutTags);
  const events: LifecycleEvent[] = new Array(rows.length);
  for (let index = 0; index < rows.length; index++) events[index] = eventFromValues(rows[index]!, readTags);
  return events;
}

export class SqlLifecycleRepository implements LifecycleRepository {
  constructor(
    private readonly database: Database,
    /** Runs every statement: the driver, or the transaction of the unit of work that built this repository. */
    private readonly sql: SqlExecutor,
    /** The unit of work's events, published once it commits; null outside a transaction. */
    private readonly unit: { readonly events: LifecycleEvent[] } | null,
    /** Tells the committed listeners at once: outside a transaction an insert is its own commit. */
    private readonly publishCommitted: (events: readonly LifecycleEvent[]) => void,
  ) {}

  async findEventsByIds(organizationId: string, ids: readonly string[], notBefore: Date): Promise<LifecycleEvent[]> {
    if (ids.length === 0) return [];
    const postgres = this.database.provider === "postgres";
    // PostgreSQL's log is indexed on the ids as uuid values (migration 0016): the ids are compared as such, so
    // a string that is no UUID is no event's id (and would fail the cast).
    const wanted = postgres ? ids.filter(isUuid) : ids;
    const rows = await findInChunks(wanted, (chunk) =>
      this.sql.values(Prisma.sql`
        SELECT ${EVENT_COLUMNS} FROM "lifecycle_events" e
        WHERE e."organization_id" = ${organizationId} AND ${
          postgres
            ? Prisma.sql`e."id"::uuid = ANY(CAST(${[...chunk]} AS UUID[]))`
            : isOneOf(this.database.provider, Prisma.sql`e."id"`, chunk)
        }
          AND e."occurred_at" >= ${notBefore}`),
    );
    return eventsFromValues(rows);
  }

  async insertEvent(event: LifecycleEvent): Promise<void> {
    const [position] = await this.takeLivePositions(1);
    await this.intoExistingMonths([event], () =>
      this.sql.run(Prisma.sql`
        INSERT INTO "lifecycle_events" ("id", "organization_id", "reference_id", "type", "occurred_at", "detail",
          "reference_tags", "position")
        VALUES (${event.id}, ${event.organizationId}, ${event.referenceId}, ${event.type}, ${event.occurredAt},
          ${this.json(event.detail)}, ${this.json(event.referenceTags)}, ${this.livePosition(position)})`),
    );
    // Outside a transaction the insert is its own commit.
    if (this.unit) this.unit.events.push(event);
    else this.publishCommitted([event]);
  }

  /**
   * Runs `insert` of `events`. On PostgreSQL an event whose month has no partition yet fails the insert (months
   * are made ahead, at start and by every prune, so only an event far from now meets this): outside a unit of
   * work the months are made and the insert runs again; inside one, its transaction is lost, so the unit of work
   * makes them and runs the whole unit again (MissingLogMonthError, sql-store.ts).
   */
  private async intoExistingMonths(events: readonly LifecycleEvent[], insert: () => Promise<unknown>): Promise<void> {
    try {
      await insert();
    } catch (error) {
      if (!isMissingLogMonth(error)) throw error;
      const instants = events.map((event) => event.occurredAt);
      if (this.unit) throw new MissingLogMonthError(instants, { cause: error });
      await ensureLogMonths(this.database, instants);
      await insert();
    }
  }

  async prepareMonths(instants: readonly Date[]): Promise<void> {
    if (this.database.provider === "postgres") await ensureLogMonths(this.database, instants);
  }

  async dropMonthsBefore(cutoff: Date): Promise<number | null> {
    if (this.database.provider !== "postgres") return null;
    return (await dropLogMonthsBefore(this.database, cutoff)).events;
  }

  /**
   * On SQLite, the live positions of the next `count` events of this transaction, in insertion order: one bump
   * of the counter for the whole statement instead of migration 0004's trigger, which runs two UPDATEs per
   * event (the counter, then the row just inserted and three of its indexes). The transaction holds SQLite's
   * write lock from this bump to its commit, so the numbers are in commit order as the trigger's were. Empty
   * (NULL positions, numbered by the trigger) outside a transaction, where the bump and the insert would be two
   * commits, and on PostgreSQL, whose positions come from a sequence and the commit numbering (migration 0006).
   */
  private async takeLivePositions(count: number): Promise<number[]> {
    if (this.database.provider !== "sqlite" || !this.unit || count === 0) return [];
    const [row] = await this.sql.all<{ last_position: number }>(Prisma.sql`
      UPDATE "lifecycle_log_sequence" SET "last_position" = "last_position" + ${count} WHERE "id" = 1
      RETURNING "last_position"`);
    const first = Number(row!.last_position) - count + 1;
    return Array.from({ length: count }, (_, offset) => first + offset);
  }

  /** A position from takeLivePositions, or the database's own numbering (the trigger, the sequence). */
  private livePosition(position: number | undefined): Prisma.Sql {
    if (position !== undefined) return Prisma.sql`${position}`;
    return this.database.provider === "postgres" ? Prisma.sql`DEFAULT` : Prisma.sql`NULL`;
  }

  /** A JSON parameter: text on SQLite, jsonb on PostgreSQL. */
  private json(value: unknown): Prisma.Sql {
    return jsonParameter(this.database.provider, value);
  }

  /**
   * The events page as a subquery, walking the (reference_id, occurred_at, id) index in the page's order and
   * stopping at the limit. SQLite's planner picks that index for `reference_id = ? AND occurred_at >= ?`.
   *
   * PostgreSQL drops a column fixed by an equality from the ORDER BY and, for a reference holding most of the
   * table, once walked the occurred_at index instead; its generic plan (kept after five executions of a prepared
   * statement) estimates a reference's rows as the average reference's, and then sorts the reference's whole window
   * rather than read it in order (0.5–0.9 s a page on a reference of 1,000,000 events; still so on the partitioned
   * log, where the sort won by less than a per cent of its cost). So the reference is bounded by row comparisons on
   * (reference_id, occurred_at[, id]) that imply the equality without stating it: the ORDER BY keeps its leading
   * column, only the (reference_id, occurred_at, id) index serves it whole, and the bounds are its index
   * conditions (docs/decisions.md, "An events page's plan").
   *
   * The log is partitioned by month of occurred_at (migration 0016): one plain lower bound on occurred_at — the
   * retention cutoff or `from` — leaves the months before the page's
   * window out of the plan (or out of its run, generic plans); each month left is one descent of its index, merged
   * in the page's order (a Merge Append, no sort), and the read stops at the limit. One bound only: with a plain
   * upper bound as well, a generic plan estimates the pair as a narrow range (0.5 % of the rows) and sorts again;
   * the upper bounds (`to`) and the cursor are the row comparisons', which end or start each month's descent at
   * once. The index holds the ids as uuid values, and the statement
   * compares the same expressions. test/events-page-plans.test.ts holds every shape of the page to the index and to
   * the months of its window, under custom and generic plans.
   */
  private eventPage(query: EventListQuery): Prisma.Sql {
    const from = query.from && query.from > query.notBefore ? query.from : query.notBefore;
    if (this.database.provider === "postgres") return this.postgresEventPage(query, from);
    const conditions = [Prisma.sql`e."reference_id" = ${query.referenceId}`, Prisma.sql`e."occurred_at" >= ${from}`];
    if (query.to) conditions.push(Prisma.sql`e."occurred_at" <= ${query.to}`);
    if (query.types && query.types.length > 0) conditions.push(isOneOf("sqlite", Prisma.sql`e."type"`, query.types));
    const direction = Prisma.raw(query.order === "asc" ? "ASC" : "DESC");
    if (query.after) {
      const beyond = Prisma.raw(query.order === "asc" ? ">" : "<");
      const { occurredAt, id } = query.after;
      conditions.push(
        Prisma.sql`(e."occurred_at" ${beyond} ${occurredAt} OR (e."occurred_at" = ${occurredAt} AND e."id" ${beyond} ${id}))`,
      );
    }
    return Prisma.sql`
      SELECT ${eventColumns(query)} FROM "lifecycle_events" e WHERE ${Prisma.join(conditions, " AND ")}
      ORDER BY e."reference_id" ${direction}, e."occurred_at" ${direction}, e."id" ${direction}
      LIMIT ${literalLimit(query.limit)}`;
  }

  /** eventPage on PostgreSQL (see there). */
  private postgresEventPage(query: EventListQuery, from: Date): Prisma.Sql {
    const reference = Prisma.sql`CAST(${query.referenceId} AS UUID)`;
    const conditions: Prisma.Sql[] = [
      Prisma.sql`(e."reference_id"::uuid, e."occurred_at") >= (${reference}, ${from})`,
      query.to
        ? Prisma.sql`(e."reference_id"::uuid, e."occurred_at") <= (${reference}, ${query.to})`
        : Prisma.sql`e."reference_id"::uuid <= ${reference}`,
      // The months: one plain bound on the partition key (see above).
      Prisma.sql`e."occurred_at" >= ${from}`,
    ];
    if (query.types && query.types.length > 0) {
      conditions.push(isOneOf("postgres", Prisma.sql`e."type"`, query.types));
    }
    const direction = Prisma.raw(query.order === "asc" ? "ASC" : "DESC");
    if (query.after) {
      const beyond = Prisma.raw(query.order === "asc" ? ">" : "<");
      const { occurredAt, id } = query.after;
      // At or beyond the cursor, then not the cursor's own event: the same rows as strictly beyond it (ids are
      // unique), but the planner estimates a row comparison by its first column alone, and `reference_id >` the
      // page's reference leaves the reference out: a deep page of a big reference was taken for a few rows and
      // the rest of the reference read and sorted.
      conditions.push(
        Prisma.sql`(e."reference_id"::uuid, e."occurred_at", e."id"::uuid) ${beyond}= (${reference}, ${occurredAt}, CAST(${id} AS UUID))`,
        Prisma.sql`e."id"::uuid <> CAST(${id} AS UUID)`,
      );
    }
    return Prisma.sql`
      SELECT ${eventColumns(query)} FROM "lifecycle_events" e WHERE ${Prisma.join(conditions, " AND ")}
      ORDER BY e."reference_id"::uuid ${direction}, e."occurred_at" ${direction}, e."id"::uuid ${direction}
      LIMIT ${literalLimit(query.limit)}`;
  }

  async listEvents(query: EventListQuery): Promise<LifecycleEvent[]> {
    return eventsFromValues(await this.sql.values(this.eventPage(query)), query.withoutTagSnapshots);
  }

  async listEventsOfReference(organizationId: string, query: EventListQuery): Promise<LifecycleEvent[] | null> {
    // The reference's row LEFT JOINed to its page of events: no row at all means no such reference, one row
    // with a NULL event an empty page. The events keep the page's order (the subquery's ORDER BY is repeated
    // outside, where SQL guarantees it).
    const direction = Prisma.raw(query.order === "asc" ? "ASC" : "DESC");
    const rows = await this.sql.values(Prisma.sql`
      SELECT page.* FROM "shipping_references" r
      LEFT JOIN (${this.eventPage(query)}) AS page ON page."reference_id" = r."id"
      WHERE r."id" = ${query.referenceId} AND r."organization_id" = ${organizationId}
      ORDER BY page."occurred_at" ${direction}, ${this.pageId()} ${direction}`);
    if (rows.length === 0) return null;
    // `page.*` is EVENT_COLUMNS, the event's id first.
    return eventsFromValues(
      rows.filter((row) => row[0] !== null),
      query.withoutTagSnapshots,
    );
  }

  async findReferenceWithEvents(organizationId: string, query: EventListQuery): Promise<ReferenceWithEvents | null> {
    if (this.database.provider !== "postgres") {
      // SQLite has no round trip to save, and the one statement below cost it twice the two (0.14 against 0.07 ms
      // in the bench's database time): the reference, then its page, as Query.reference and Reference.events
      // read them apart.
      const [row] = await this.sql.values(Prisma.sql`
        SELECT ${REFERENCE_COLUMNS} FROM "shipping_references" r
        WHERE r."id" = ${query.referenceId} AND r."organization_id" = ${organizationId}`);
      if (row === undefined) return null;
      return { reference: taggedReferenceFromValues(row), events: await this.listEvents(query) };
    }
    // One statement, so one round trip on PostgreSQL: the reference's row, and its page of events as one JSON
    // array of EVENT_COLUMNS' values, in the page's order (NULL when the page is empty). As rows, the page cost
    // the driver about 120 µs of the event loop per request (each value of each row read, sliced and converted
    // in JavaScript: a union of the reference's row and the events' rows, NULLs standing for the other part's
    // columns); as one value it is one JSON.parse, and about 80 µs (docs/decisions.md).
    const direction = Prisma.raw(query.order === "asc" ? "ASC" : "DESC");
    const rows = await this.sql.values(Prisma.sql`
      SELECT ${REFERENCE_COLUMNS}, (
        SELECT json_agg(json_build_array(${EVENT_PAGE_COLUMNS})
          ORDER BY page."occurred_at" ${direction}, ${this.pageId()} ${direction})
        FROM (${this.eventPage(query)}) AS page)
      FROM "shipping_references" r
      WHERE r."id" = ${query.referenceId} AND r."organization_id" = ${organizationId}`);
    const [row] = rows;
    if (row === undefined) return null;
    const events = (row[REFERENCE_COLUMN_COUNT] ?? []) as unknown[][];
    return { reference: taggedReferenceFromValues(row), events: eventsFromValues(events, query.withoutTagSnapshots) };
  }

  /** A page's id in the page's order: as uuid on PostgreSQL, as eventPage orders it. */
  private pageId(): Prisma.Sql {
    return Prisma.raw(this.database.provider === "postgres" ? `page."id"::uuid` : `page."id"`);
  }

  deleteEventsBefore(cutoff: Date, batchSize: number): Promise<number> {
    // One bounded batch (SQLite has no DELETE ... LIMIT by default), found per organization through the
    // (organization_id, occurred_at, id) index: the log has no index on occurred_at alone (migration 0016).
    // PostgreSQL drops months instead (dropMonthsBefore).
    return this.sql.run(Prisma.sql`
      DELETE FROM "lifecycle_events" WHERE "id" IN (
        SELECT "id" FROM "lifecycle_events"
        WHERE "organization_id" IN (SELECT "id" FROM "organizations") AND "occurred_at" < ${cutoff}
        LIMIT ${literalLimit(batchSize)})`);
  }

  // ---------------------------------------------------------------------------------------------------------
  // Set-wise writes (bulk ingestion): a fixed number of statements whatever the number of rows; multi-row
  // statements are cut in chunks only past MAX_PARAMETERS_PER_STATEMENT.
  // ---------------------------------------------------------------------------------------------------------

  async insertEvents(events: readonly LifecycleEvent[]): Promise<void> {
    const positions = await this.takeLivePositions(events.length);
    let index = 0;
    for (const chunk of chunksOf(events, 8)) {
      const first = index;
      index += chunk.length;
      await this.intoExistingMonths(chunk, () => this.insertChunk(chunk, positions, first));
    }
    // As insertEvent: published once the unit of work commits (outside one, the inserts were their own commits).
    if (this.unit) this.unit.events.push(...events);
    else this.publishCommitted(events);
  }

  /** One multi-row INSERT of `chunk`, whose first event takes `positions[first]`. */
  private insertChunk(chunk: readonly LifecycleEvent[], positions: readonly number[], first: number): Promise<number> {
    let index = first;
    return this.sql.run(Prisma.sql`
        INSERT INTO "lifecycle_events" ("id", "organization_id", "reference_id", "type", "occurred_at", "detail",
          "reference_tags", "position")
        VALUES ${Prisma.join(
          chunk.map(
            (event) =>
              Prisma.sql`(${event.id}, ${event.organizationId}, ${event.referenceId}, ${event.type},
                ${event.occurredAt}, ${this.json(event.detail)}, ${this.json(event.referenceTags)},
                ${this.livePosition(positions[index++])})`,
          ),
        )}`);
  }
}
