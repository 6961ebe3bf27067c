import type {
  FeedLogStore,
  FeedPageQuery,
  FeedPageRead,
  LiveEvent,
  LiveLogStore,
  ReplayQuery,
  SettledRead,
  SettledReadQuery,
} from "../../domain/live/live-feed-ports.ts";
import { laterOf, type LogPosition } from "../../domain/live/log-position.ts";
import type { Database } from "../database.ts";
import { eventFromRow, type EventRow } from "./lifecycle-repository.ts";
import { Prisma } from "./sql-template.ts";
import { isOneOf } from "./value-lists.ts";
import { literalLimit } from "./literal-limit.ts";

/*
 * Reads of the lifecycle log in live order (see src/domain/live/log-position.ts), one statement each.
 *
 * - SQLite: the order is `lifecycle_events.position`, taken under the write lock inside the writing transaction
 *   (migration 0004); `commit` is always 0. `lifecycle_log_sequence` holds the last number handed out.
 * - PostgreSQL: the order is `(lifecycle_commits.position, lifecycle_events.position)`: the number the event's
 *   transaction took at COMMIT for its organization (migration 0006), then the event's order inside it. Numbers
 *   become visible in increasing order, so every read returns final results: no horizon, no waiting for other
 *   writers. A commit row carries the span of its events' `occurred_at` (migration 0016): each commit's events
 *   are read, commit after commit (the `(organization_id, position)` index of `lifecycle_commits`), from the
 *   months of that span only (the log is partitioned by month; run-time pruning on the commit's values) and
 *   through the `(organization_id, occurred_at, id)` index over that span: an event written now is one short
 *   range of this month's partition. The join is a LATERAL subquery behind OFFSET 0 so that it stays a loop over
 *   commits: as a plain join, a log loaded in a few big transactions (the statistics then see few transaction
 *   ids) was planned as a hash join over every partition of the log.
 */

const MAX_SEQUENCE = 9_223_372_036_854_775_807n;

interface LiveEventRow extends EventRow {
  readonly commit_position: number | bigint | string;
  readonly position: number | bigint | string;
}

const COLUMNS = Prisma.raw(
  ["id", "organization_id", "reference_id", "type", "occurred_at", "detail", "reference_tags", "position"]
    .map((column) => `e."${column}"`)
    .join(", "),
);

export class SqlLiveLogStore implements LiveLogStore, FeedLogStore {
  private readonly postgres: boolean;

  constructor(private readonly database: Database) {
    this.postgres = database.provider === "postgres";
  }

  async readSettled(query: SettledReadQuery): Promise<SettledRead> {
    const conditions = [this.after(query.after)];
    if (query.organizationIds) conditions.push(this.inOrganizations(query.organizationIds));
    // The page and the end of the log in one statement, so one snapshot: one round trip per read of the feed,
    // and nothing can commit between the two. An empty page still gives one row (with the end).
    const rows = await this.database.sql.all<LiveEventRow & { readonly settled_end: string | null }>(Prisma.sql`
      SELECT ${this.settledEnd()} AS "settled_end", page.* FROM (SELECT 1 AS "anchor") AS anchor
      LEFT JOIN (${this.page(conditions, query.limit)}) AS page ON TRUE
      ORDER BY page."commit_position", page."position"`);
    const end = this.endPosition(rows[0]?.settled_end ?? null);
    const events = rows.filter((row) => row.id !== null).map(liveEventFromRow);
    const last = events.at(-1)?.position ?? query.after;
    // A full page may stop short of the end; otherwise the read saw everything up to it.
    return { events, reached: events.length < query.limit ? laterOf(last, end) : last };
  }

  async readFeedPage(query: FeedPageQuery): Promise<FeedPageRead> {
    if (this.postgres) return this.readFeedPageByCommits(query);
    const conditions = [
      this.after(query.after),
      this.inOrganizations([query.organizationId]),
      Prisma.sql`e."occurred_at" >= ${query.notBefore}`,
      ...this.eventFilters(query),
    ];
    const tagFilters = this.tagFilters(query);
    // The page and the end of the log in one snapshot, as readSettled: a poller that finds nothing is handed
    // that end as its cursor, and nothing can commit before it afterwards. With tag filters, the next `limit`
    // rows are read and only those that match are returned: a filter that matches little used to send every row
    // to this thread to be parsed and dropped, and one organization's scans held the event loop (issue 49.3).
    const rows = await this.database.sql.all<
      LiveEventRow & {
        readonly settled_end: string | null;
        readonly rows_read: number | bigint;
        readonly read_to: number | bigint | null;
      }
    >(Prisma.sql`
      WITH "read" AS MATERIALIZED (${this.page(conditions, query.limit)})
      SELECT ${this.settledEnd()} AS "settled_end", (SELECT COUNT(*) FROM "read") AS "rows_read",
             (SELECT MAX("position") FROM "read") AS "read_to", page.*
      FROM (SELECT 1 AS "anchor") AS anchor
      LEFT JOIN (SELECT * FROM "read" e WHERE ${tagFilters.length > 0 ? Prisma.join(tagFilters, " AND ") : Prisma.sql`1 = 1`})
        AS page ON TRUE
      ORDER BY page."position"`);
    const first = rows[0];
    const events = rows.filter((row) => row.id !== null).map(liveEventFromRow);
    const end = this.endPosition(first?.settled_end ?? null);
    const rowsRead = Number(first?.rows_read ?? 0);
    // Fewer rows than asked: the log ended. All of them, fewer matching: the next read starts after the last row.
    if (rowsRead < query.limit || events.length === query.limit || first?.read_to == null) {
      return { events, end, rowsRead };
    }
    return { events, end, rowsRead, stoppedAt: { commit: 0n, sequence: BigInt(first.read_to) } };
  }

  /** SQLite: the tag filters on the event's snapshot of its reference's tags (a JSON array of `{ id, name }`). */
  private tagFilters(query: FeedPageQuery): Prisma.Sql[] {
    const hasTag = (ids: readonly string[]) => Prisma.sql`EXISTS (SELECT 1 FROM json_each(e."reference_tags") AS t
      WHERE ${isOneOf(this.database.provider, Prisma.sql`json_extract(t."value", '$.id')`, ids)})`;
    const conditions: Prisma.Sql[] = [];
    if (query.tagIds) conditions.push(hasTag(query.tagIds));
    if (query.excludedTagIds && query.excludedTagIds.length > 0)
      conditions.push(Prisma.sql`NOT ${hasTag(query.excludedTagIds)}`);
    return conditions;
  }

  /**
   * PostgreSQL: the feed's page from the commits it needs, whatever the planner estimates. The organization's next
   * commits are taken in order, as many as hold `limit` events by their counts (migration 0025; each holds one at
   * least, so `limit` commits always do), then the events of those commits only, each commit's at most `limit`.
   * Read as one join, the planner estimated a commit's events at one row (independent selectivities multiplied)
   * and planned a page as a sort of every event of the organization after the cursor: 185 ms for a page on a log
   * of 100,000 events written 500 at a time, and one organization's filtered scans held the instance's reads for
   * seconds (issue 49.3). A page that the counted commits do not fill (filters, events past retention, a cursor
   * inside a commit) says where it stopped, and the next read goes on from there.
   */
  private async readFeedPageByCommits(query: FeedPageQuery): Promise<FeedPageRead> {
    const { after, limit } = query;
    // A position at the end of a commit (where a read stopped) is past all of it: the next read starts after it.
    const firstCommit =
      after.sequence === MAX_SEQUENCE
        ? Prisma.sql`c."position" > ${after.commit}`
        : Prisma.sql`c."position" >= ${after.commit}`;
    const eventConditions = [
      Prisma.sql`(c."position" > ${after.commit} OR e."position" > ${after.sequence})`,
      Prisma.sql`e."occurred_at" >= ${query.notBefore}`,
      ...this.eventFilters(query),
    ];
    const rows = await this.database.sql.all<
      LiveEventRow & {
        readonly settled_end: string | null;
        readonly read_to: string | null;
        readonly commits_left: boolean;
        readonly rows_read: number | string | null;
      }
    >(Prisma.sql`
      WITH next_commits AS MATERIALIZED (
        SELECT c."position", c."organization_id", c."transaction_id", c."first_occurred_at", c."last_occurred_at",
               COALESCE(c."event_count", 1) AS "counted"
        FROM "lifecycle_commits" c
        WHERE c."organization_id" = ${query.organizationId} AND ${firstCommit}
          AND c."last_occurred_at" >= ${query.notBefore}
        ORDER BY c."position" LIMIT ${literalLimit(limit)}
      ), read_commits AS MATERIALIZED (
        SELECT * FROM (
          SELECT n.*, SUM(n."counted") OVER (ORDER BY n."position") - n."counted" AS "counted_before"
          FROM next_commits n) AS counted
        WHERE counted."counted_before" < ${limit}
      )
      SELECT ${this.settledEnd()} AS "settled_end",
             (SELECT MAX("position")::text FROM read_commits) AS "read_to",
             (SELECT COUNT(*) FROM next_commits) = ${limit}
               OR (SELECT COUNT(*) FROM next_commits) > (SELECT COUNT(*) FROM read_commits) AS "commits_left",
             (SELECT SUM(LEAST("counted", ${limit})) FROM read_commits) AS "rows_read",
             page.*
      FROM (SELECT 1 AS "anchor") AS anchor
      LEFT JOIN (
        SELECT ${COLUMNS}, c."position" AS "commit_position" FROM read_commits c
        CROSS JOIN LATERAL (
          SELECT e.* FROM "lifecycle_events" e
          WHERE e."organization_id"::uuid = c."organization_id"::uuid
            AND e."occurred_at" BETWEEN c."first_occurred_at" AND c."last_occurred_at"
            AND e."transaction_id" = c."transaction_id"
            AND ${Prisma.join(eventConditions, " AND ")}
          ORDER BY e."position" LIMIT ${literalLimit(limit)}) AS e
        ORDER BY c."position", e."position" LIMIT ${literalLimit(limit)}) AS page ON TRUE
      ORDER BY page."commit_position", page."position"`);
    const first = rows[0];
    const events = rows.filter((row) => row.id !== null).map(liveEventFromRow);
    const end = this.endPosition(first?.settled_end ?? null);
    // A full page read what it returns; a short one went through its commits (each read up to `limit` rows).
    if (events.length === limit) return { events, end, rowsRead: limit };
    const rowsRead = Math.max(events.length, Number(first?.rows_read ?? 0));
    if (!first?.commits_left || first.read_to === null) return { events, end, rowsRead };
    // Every commit up to read_to was read whole: the next read starts after it.
    return { events, end, rowsRead, stoppedAt: { commit: BigInt(first.read_to), sequence: MAX_SEQUENCE } };
  }

  /** The feed's reference and type filters, on the events. */
  private eventFilters(query: FeedPageQuery): Prisma.Sql[] {
    const conditions: Prisma.Sql[] = [];
    if (query.referenceId !== undefined) conditions.push(Prisma.sql`e."reference_id" = ${query.referenceId}`);
    if (query.types && query.types.length > 0)
      conditions.push(isOneOf(this.database.provider, Prisma.sql`e."type"`, query.types));
    return conditions;
  }

  async findSettledEnd(): Promise<LogPosition> {
    const [row] = await this.database.sql.all<{ settled_end: string | null }>(Prisma.sql`
      SELECT ${this.settledEnd()} AS "settled_end"`);
    return this.endPosition(row?.settled_end ?? null);
  }

  /** The last number handed out (as text: 64 bits): SQLite's event counter, PostgreSQL's last commit. */
  private settledEnd(): Prisma.Sql {
    return this.postgres
      ? Prisma.sql`(SELECT MAX("position")::text FROM "lifecycle_commits")`
      : Prisma.sql`(SELECT CAST("last_position" AS TEXT) FROM "lifecycle_log_sequence" WHERE "id" = 1)`;
  }

  private endPosition(last: string | null): LogPosition {
    const number = BigInt(last ?? 0);
    return this.postgres ? { commit: number, sequence: MAX_SEQUENCE } : { commit: 0n, sequence: number };
  }

  async readRange(query: ReplayQuery): Promise<LiveEvent[]> {
    const conditions = [
      this.after(query.after),
      this.atOrBefore(query.until),
      this.inOrganizations([query.organizationId]),
      Prisma.sql`e."occurred_at" >= ${query.notBefore}`,
    ];
    if (query.referenceId !== undefined) conditions.push(Prisma.sql`e."reference_id" = ${query.referenceId}`);
    if (query.types && query.types.length > 0)
      conditions.push(isOneOf(this.database.provider, Prisma.sql`e."type"`, query.types));
    return this.read(conditions, query.limit);
  }

  async findPosition(organizationId: string, eventId: string): Promise<LogPosition | null> {
    // On PostgreSQL the log's ids are indexed as uuid values (migration 0016).
    const id = this.postgres ? Prisma.sql`e."id"::uuid = CAST(${eventId} AS UUID)` : Prisma.sql`e."id" = ${eventId}`;
    const [row] = await this.read([this.inOrganizations([organizationId]), id], 1);
    return row?.position ?? null;
  }

  private async read(conditions: Prisma.Sql[], limit: number): Promise<LiveEvent[]> {
    const rows = await this.database.sql.all<LiveEventRow>(this.page(conditions, limit));
    return rows.map(liveEventFromRow);
  }

  /** Events matching `conditions` in live order, at most `limit`, with their `commit_position`. */
  private page(conditions: Prisma.Sql[], limit: number): Prisma.Sql {
    const where = Prisma.join(conditions, " AND ");
    return this.postgres
      ? Prisma.sql`
            SELECT ${COLUMNS}, c."position" AS "commit_position" FROM "lifecycle_commits" c
            CROSS JOIN LATERAL (
              SELECT e.* FROM "lifecycle_events" e
              WHERE e."organization_id"::uuid = c."organization_id"::uuid
                AND e."occurred_at" BETWEEN c."first_occurred_at" AND c."last_occurred_at"
                AND e."transaction_id" = c."transaction_id"
              OFFSET 0) AS e
            WHERE ${where} ORDER BY c."position", e."position" LIMIT ${literalLimit(limit)}`
      : Prisma.sql`
            SELECT ${COLUMNS}, 0 AS "commit_position" FROM "lifecycle_events" e
            WHERE ${where} ORDER BY e."position" LIMIT ${literalLimit(limit)}`;
  }

  /** Strictly after `position` in live order (SQLite has no commit number: it is always 0 there). */
  private after(position: LogPosition): Prisma.Sql {
    // SQLite: transaction_id is always 0 there; stated, it lets the (transaction_id, position) indexes give the
    // live order (without it, a read sorted the whole log, or the whole organization).
    if (!this.postgres) return Prisma.sql`e."transaction_id" = 0 AND e."position" > ${position.sequence}`;
    return Prisma.sql`c."position" >= ${position.commit}
      AND (c."position" > ${position.commit} OR e."position" > ${position.sequence})`;
  }

  private atOrBefore(position: LogPosition): Prisma.Sql {
    if (!this.postgres) return Prisma.sql`e."position" <= ${position.sequence}`;
    return Prisma.sql`c."position" <= ${position.commit}
      AND (c."position" < ${position.commit} OR e."position" <= ${position.sequence})`;
  }

  private inOrganizations(ids: readonly string[]): Prisma.Sql {
    // On PostgreSQL on the commit rows, so the (organization_id, position) index drives the read.
    const column = Prisma.raw(this.postgres ? `c."organization_id"` : `e."organization_id"`);
    return ids.length === 1 ? Prisma.sql`${column} = ${ids[0]}` : isOneOf(this.database.provider, column, ids);
  }
}

function liveEventFromRow(row: LiveEventRow): LiveEvent {
  return {
    event: eventFromRow(row),
    position: { commit: BigInt(row.commit_position), sequence: BigInt(row.position) },
  };
}
