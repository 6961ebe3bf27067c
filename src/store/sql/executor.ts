import type { Prisma } from "./sql-template.ts";
import type { StatementCacheStats } from "./statement-cache.ts";

/*
 * The store's statements at driver speed: one executor per driver (sqlite-executor.ts, postgres-executor.ts)
 * behind these two interfaces. Statements are `Prisma.sql` fragments (Prisma's tagged template: text plus bound
 * values); the executors run them on better-sqlite3 and node-postgres directly, without Prisma's client, whose
 * per-statement cost is 20–50 times the driver's (docs/decisions.md, "Data path").
 *
 * A unit of work is explicit: `transaction(work)` hands `work` the unit's own executor, and every statement of
 * the unit goes through it. A statement sent through the outer executor while a unit is open is not part of the
 * unit (on either database): it commits on its own, and sees only what has committed.
 *
 * Values are written the way Prisma's adapters write them, so rows are the same whichever path wrote them:
 * on SQLite a Date is ISO text with `+00:00` and a boolean 0/1; on PostgreSQL a Date is UTC text for the
 * `timestamp(3)` columns (no zone). Rows come back with the driver's types, which rows.ts reads on both
 * databases (dates as text or Date, booleans as 0/1 or boolean, JSON as text or parsed).
 */

/** Runs statements: outside any transaction, or in the transaction of the unit of work that handed it out. */
export interface SqlExecutor {
  /** The rows of a statement (a write with RETURNING included). */
  all<Row>(query: Prisma.Sql): Promise<Row[]>;
  /**
   * The rows of a read as arrays of their column values, in the SELECT's order: the drivers build an array far
   * more cheaply than an object with one property per column (a page of 50 references, 17 columns each).
   */
  values(query: Prisma.Sql, options?: ReadOptions): Promise<unknown[][]>;
  /** Runs a statement and returns the number of rows it changed. */
  run(query: Prisma.Sql): Promise<number>;
}

/** The executor outside any transaction, which starts units of work. */
export interface TransactionalExecutor extends SqlExecutor {
  /**
   * Runs `work` in one database transaction, with the executor of that transaction: committed when `work`
   * resolves, rolled back when it throws. A unit in which a statement failed never passes for committed.
   */
  transaction<T>(work: (unit: SqlExecutor) => Promise<T>): Promise<T>;
  /** Closes the connections the executor opened itself. */
  close(): Promise<void>;
  /** Its caches of prepared statements, each bounded (statement-cache.ts), as /metrics tells them. */
  statementCaches(): StatementCacheStats[];
}

export interface ReadOptions {
  /**
   * A page: a read whose cost grows with the rows it returns. On SQLite, outside a unit of work, it runs on the
   * read thread (src/store/sql/sqlite-read-thread.ts); a short read stays on the event loop's thread, where it
   * costs less than handing it over and back.
   */
  readonly page?: boolean;
}

/** Told the text of every statement an executor sends (transaction control included); tests count them. */
export type StatementListener = (sql: string) => void;
