import type pg from "pg";
import type { Database } from "../database.ts";

/*
 * PostgreSQL's lifecycle log is partitioned by calendar month of `occurred_at` (UTC, as stored; migration 0016,
 * docs/decisions.md, "The log partitioned by month"). This module makes months and drops them; the partitions are
 * found by their bounds through the database's own `lifecycle_events_months()`, never by name, so months made by
 * hand or by another tool are months like the others. SQLite's log is one table: nothing here runs on it.
 */

/** The first instant of the UTC month of `instant`. */
function monthStart(instant: Date): Date {
  return new Date(Date.UTC(instant.getUTCFullYear(), instant.getUTCMonth(), 1));
}

/** A timestamp as the `timestamp(3)` columns hold it: UTC text without a zone. */
function storedTimestamp(instant: Date): string {
  return instant.toISOString().replace("T", " ").replace("Z", "");
}

/**
 * Makes the month of each of `instants` that no partition covers; returns how many it made. On a connection of
 * its own, outside any unit of work: the unit that wanted the month runs again once it is made (sql-store.ts),
 * and a read connection is never held up behind the advisory lock that serializes the instances making months.
 */
export async function ensureLogMonths(database: Database, instants: readonly Date[]): Promise<number> {
  const months = [...new Set(instants.map((instant) => storedTimestamp(monthStart(instant))))];
  if (months.length === 0) return 0;
  return withOwnConnection(database, async (client) => {
    // One statement, so one transaction: the months made in it appear together.
    const { rows } = await client.query<{ made: string }>(
      `SELECT COUNT(*) FILTER (WHERE "lifecycle_events_ensure_month"(m)) AS "made"
       FROM unnest(CAST($1 AS TIMESTAMP(3)[])) AS m`,
      [months],
    );
    return Number(rows[0]?.made ?? 0);
  });
}

/** Runs `work` on a connection opened for it (node-postgres, loaded only here), closed after. */
async function withOwnConnection<T>(database: Database, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const { default: driver } = await import("pg");
  const client = new driver.Client({ connectionString: database.url });
  // A connection the server ends emits "error"; the statement in flight rejects on its own.
  client.on("error", () => {});
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** PostgreSQL's SQLSTATE check_violation, which is also what an insert into a month with no partition raises. */
const CHECK_VIOLATION = "23514";

/** Whether `error` says that the log has no partition for a row an insert wrote. */
export function isMissingLogMonth(error: unknown): boolean {
  const { code, message } = (error ?? {}) as { code?: unknown; message?: unknown };
  return (
    code === CHECK_VIOLATION &&
    typeof message === "string" &&
    message.startsWith('no partition of relation "lifecycle_events"')
  );
}

/**
 * An insert into the log inside a unit of work found its month missing. The unit's transaction is lost; the unit
 * of work makes the months outside it and runs the unit again (sql-store.ts).
 */
export class MissingLogMonthError extends Error {
  constructor(
    readonly instants: readonly Date[],
    options: { cause: unknown },
  ) {
    super("the lifecycle log has no partition for the month of an event", options);
    this.name = "MissingLogMonthError";
  }
}

/** What a prune by month did. */
export interface DroppedMonths {
  /** The partitions detached and dropped. */
  readonly months: number;
  /**
   * The events they held, as the catalog estimates them (the larger of the planner's `reltuples` and the
   * statistics' live-row count): counting a month would read all of it only to report a number.
   */
  readonly events: number;
  /** Commit rows (the live order's, migration 0006) of those events, deleted. */
  readonly commits: number;
}

/** Commit rows deleted per statement: each statement is short, so writers are not held up behind it. */
const COMMIT_BATCH = 10_000;

/**
 * Drops every month of the log that ends at or before `cutoff`: each partition is detached with DETACH …
 * CONCURRENTLY, which never stops writers or readers of the other months (it takes SHARE UPDATE EXCLUSIVE on the
 * log, then waits for the transactions that might still see the partition), then dropped, which gives its space
 * back at once. The month that straddles the cutoff stays. DETACH … CONCURRENTLY cannot run inside a transaction,
 * so this runs on a connection of its own, statement by statement. A partition left half-detached (a prune that
 * was stopped between the two steps) is finished first. The events reported are the catalog's estimate of what
 * the months held (see DroppedMonths): the prune reads no row of them.
 */
export async function dropLogMonthsBefore(database: Database, cutoff: Date): Promise<DroppedMonths> {
  return withOwnConnection(database, async (client) => {
    const { rows: months } = await client.query<{ partition: string; detach_pending: boolean }>(
      `SELECT "partition"::text AS "partition", "detach_pending" FROM "lifecycle_events_months"()
       WHERE "ends_at" <= $1::timestamp(3) ORDER BY "starts_at"`,
      [storedTimestamp(cutoff)],
    );
    let events = 0;
    for (const month of months) {
      // The partition's name as the catalog prints it: quoted where it needs to be.
      const name = month.partition;
      const { rows } = await client.query<{ n: string }>(
        `SELECT GREATEST(c."reltuples", COALESCE(s."n_live_tup", 0), 0)::bigint AS "n"
         FROM "pg_class" c LEFT JOIN "pg_stat_all_tables" s ON s."relid" = c."oid"
         WHERE c."oid" = $1::regclass`,
        [name],
      );
      events += Number(rows[0]?.n ?? 0);
      await client.query(
        `ALTER TABLE "lifecycle_events" DETACH PARTITION ${name} ${month.detach_pending ? "FINALIZE" : "CONCURRENTLY"}`,
      );
      await client.query(`DROP TABLE ${name}`);
    }
    // Every event left is at or after the oldest month left: the commit rows wholly before it have no events.
    const { rows: oldest } = await client.query<{ starts_at: string | null }>(
      `SELECT MIN("starts_at")::text AS "starts_at" FROM "lifecycle_events_months"()`,
    );
    let commits = 0;
    if (oldest[0]?.starts_at) {
      for (;;) {
        const deleted = await client.query(
          `DELETE FROM "lifecycle_commits" WHERE "position" IN (
             SELECT "position" FROM "lifecycle_commits" WHERE "last_occurred_at" < $1::timestamp(3) LIMIT ${COMMIT_BATCH})`,
          [oldest[0].starts_at],
        );
        commits += deleted.rowCount ?? 0;
        if ((deleted.rowCount ?? 0) < COMMIT_BATCH) break;
      }
    }
    return { months: months.length, events, commits };
  });
}
