import Sqlite from "better-sqlite3";
import type { Prisma } from "./sql-template.ts";
import type { ReadOptions, SqlExecutor, StatementListener, TransactionalExecutor } from "./executor.ts";
import { SqliteReadThread } from "./sqlite-read-thread.ts";
import { SQLITE_STATEMENTS_PER_CONNECTION, StatementCache, type StatementCacheStats } from "./statement-cache.ts";

/*
 * SQLite: the executor runs on the connection Prisma's better-sqlite3 adapter opened (src/store/prisma/), not on
 * one of its own. better-sqlite3 is synchronous: a second write connection in this process would wait for the
 * write lock by blocking the event loop that the lock holder needs to finish. One connection, one writer: the
 * adapter's transaction mutex is the queue that Prisma's transactions and the executor's units both take.
 */

/** Prisma's better-sqlite3 adapter, as far as it is used here (see @prisma/adapter-better-sqlite3). */
export interface SqliteAdapter {
  /** The connection every Prisma statement runs on. */
  readonly client: Sqlite.Database;
  /** Waits for the adapter's transaction mutex, then runs BEGIN; commit()/rollback() only release the mutex. */
  startTransaction(): Promise<{ commit(): Promise<void>; rollback(): Promise<void> }>;
}

/** The way @prisma/adapter-better-sqlite3 binds a value (its default `timestampFormat`, iso8601). */
function sqliteValue(value: unknown): unknown {
  if (value instanceof Date) return value.toISOString().replace("Z", "+00:00");
  if (typeof value === "boolean") return value ? 1 : 0;
  return value;
}

export class SqliteExecutor implements TransactionalExecutor {
  /**
   * Prepared statements by SQL text: preparing is most of a short statement's cost. Bounded (statement-cache.ts):
   * a Statement dropped is finalized when it is collected.
   */
  private statements = new StatementCache<Sqlite.Statement>("sqlite_writer", SQLITE_STATEMENTS_PER_CONNECTION);
  private statementsOf: Sqlite.Database | null = null;
  /** Evictions of the shared connection's caches before Prisma reconnected it. */
  private writerEvictionsBefore = 0;

  /** Reads outside units of work, on a connection of their own: see `all`. Opened on first use. */
  private reader: Sqlite.Database | null = null;
  private readonly readerStatements = new StatementCache<Sqlite.Statement>(
    "sqlite_reader",
    SQLITE_STATEMENTS_PER_CONNECTION,
  );
  /** With `readThread`, pages are read on a connection of a thread of their own (sqlite-read-thread.ts). */
  private readonly readThread: SqliteReadThread | null;

  constructor(
    /** The adapter Prisma connected last (it reconnects after `$disconnect`). */
    private readonly adapter: () => SqliteAdapter,
    /** The database file, for the read connection. */
    private readonly file: string,
    private readonly onStatement?: StatementListener,
    /** Whether pages read outside units of work run on a thread of their own (the server) or on this one. */
    readThread = false,
  ) {
    this.readThread = readThread ? new SqliteReadThread(file) : null;
  }

  /**
   * A read outside a unit of work runs on a read-only connection of its own. In WAL mode it sees only what has
   * committed: on the shared connection it would also see the writes of whatever unit of work is open there (a
   * unit spans awaits), so a live subscription could send an event, or take a log position, that a rollback
   * then takes back — and the next event would reuse that position unseen. (`query.sql` is a getter that joins
   * the statement's text anew on every call: each method reads it once.)
   */
  async all<Row>(query: Prisma.Sql): Promise<Row[]> {
    const sql = query.sql;
    if (this.prepared(sql).readonly) return (await this.read(sql, query.values, false, false)) as Row[];
    if (this.mustWaitForTransaction(sql)) return this.transaction((unit) => unit.all<Row>(query));
    return this.execute(sql, query.values, "all") as Row[];
  }

  async values(query: Prisma.Sql, options?: ReadOptions): Promise<unknown[][]> {
    const sql = query.sql;
    if (this.prepared(sql).readonly) {
      return (await this.read(sql, query.values, true, options?.page === true)) as unknown[][];
    }
    if (this.mustWaitForTransaction(sql)) return this.transaction((unit) => unit.values(query));
    return this.execute(sql, query.values, "values") as unknown[][];
  }

  async run(query: Prisma.Sql): Promise<number> {
    const sql = query.sql;
    if (this.mustWaitForTransaction(sql)) return this.transaction((unit) => unit.run(query));
    return this.execute(sql, query.values, "run") as number;
  }

  /** Closes the read connection (the shared one is Prisma's). */
  async close(): Promise<void> {
    await this.readThread?.close();
    this.reader?.close();
    this.reader = null;
    this.readerStatements.clear();
  }

  private read(
    sql: string,
    values: readonly unknown[],
    asArrays: boolean,
    page: boolean,
  ): unknown[] | Promise<unknown[]> {
    this.onStatement?.(sql);
    if (page && this.readThread) return this.readThread.read(sql, values.map(sqliteValue), asArrays);
    if (!this.reader) {
      this.reader = new Sqlite(this.file, { readonly: true, fileMustExist: true });
      // A reader waits only while SQLite recovers or resets the WAL, never for writers.
      this.reader.pragma("busy_timeout = 5000");
    }
    const reader = this.reader;
    const statement = this.readerStatements.get(sql, () => reader.prepare(sql));
    // A statement's raw mode (rows as arrays) stays set: every call sets the one it wants.
    return statement.raw(asArrays).all(...values.map(sqliteValue));
  }

  /**
   * While a unit of work (ours or Prisma's) is open on the shared connection, a statement sent from outside
   * would join its transaction and be rolled back with it: a write waits for the adapter's mutex and runs in a
   * transaction of its own.
   */
  private mustWaitForTransaction(sql: string): boolean {
    return this.adapter().client.inTransaction && !this.prepared(sql).readonly;
  }

  async transaction<T>(work: (unit: SqlExecutor) => Promise<T>): Promise<T> {
    // The adapter's own transaction start: Prisma's transactions and ours take turns on one mutex.
    const transaction = await this.adapter().startTransaction();
    this.onStatement?.("BEGIN");
    const unit: SqlExecutor = {
      all: async <Row>(query: Prisma.Sql) => this.execute(query.sql, query.values, "all") as Row[],
      values: async (query: Prisma.Sql) => this.execute(query.sql, query.values, "values") as unknown[][],
      run: async (query: Prisma.Sql) => this.execute(query.sql, query.values, "run") as number,
    };
    try {
      const result = await work(unit);
      this.execute("COMMIT", [], "run");
      await transaction.commit();
      return result;
    } catch (error) {
      try {
        if (this.adapter().client.inTransaction) this.execute("ROLLBACK", [], "run");
      } finally {
        await transaction.rollback();
      }
      throw error;
    }
  }

  private execute(sql: string, values: readonly unknown[], mode: "all" | "values" | "run"): unknown[] | number {
    this.onStatement?.(sql);
    const statement = this.prepared(sql);
    const parameters = values.map(sqliteValue);
    if (mode !== "run" && statement.reader) return statement.raw(mode === "values").all(...parameters);
    const { changes } = statement.run(...parameters);
    return mode === "run" ? changes : [];
  }

  private prepared(sql: string): Sqlite.Statement {
    const connection = this.adapter().client;
    if (this.statementsOf !== connection) {
      this.writerEvictionsBefore += this.statements.evictions;
      this.statements = new StatementCache("sqlite_writer", SQLITE_STATEMENTS_PER_CONNECTION);
      this.statementsOf = connection;
    }
    // Prisma's adapter turns safe integers on for the whole connection; the store's rows want numbers.
    return this.statements.get(sql, () => connection.prepare(sql).safeIntegers(false));
  }

  statementCaches(): StatementCacheStats[] {
    const writer = this.statements.stats();
    const caches = [
      { ...writer, evictions: writer.evictions + this.writerEvictionsBefore },
      this.readerStatements.stats(),
    ];
    if (this.readThread) caches.push(this.readThread.statementCache());
    return caches;
  }
}
