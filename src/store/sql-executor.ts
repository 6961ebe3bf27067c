import { AsyncLocalStorage } from "node:async_hooks";
import { createHash } from "node:crypto";
import Sqlite from "better-sqlite3";
import pg from "pg";
import type { Prisma } from "./__generated__/sqlite/client.ts";

/*
 * The store's statements at driver speed. Through Prisma 7 a statement costs 0.2–0.4 ms in the client (query
 * interpreter, adapter, a fresh `prepare` per statement on SQLite) where the driver alone takes 7–20 µs
 * (docs/decisions.md, "Data path"). The store keeps building its statements as `Prisma.sql` fragments and runs
 * them here, on the very connections Prisma uses: SQLite's single better-sqlite3 connection, PostgreSQL's pool.
 * Prisma stays the schema, the migrations and the client of record for everything that is not hot.
 *
 * Values are written the way Prisma's adapters write them, so rows are the same whichever path wrote them:
 * on SQLite a Date is ISO text with `+00:00` and a boolean 0/1; on PostgreSQL a Date is UTC text for the
 * `timestamp(3)` columns (no zone). Rows come back with the driver's types, which the store's row helpers
 * read on both databases (dates as text or Date, booleans as 0/1 or boolean, JSON as text or parsed).
 */

/** Runs statements; inside a unit of work, in its transaction. */
export interface SqlExecutor {
  /** The rows of a statement (a write with RETURNING included). */
  all<Row>(query: Prisma.Sql): Promise<Row[]>;
  /** Runs a statement and returns the number of rows it changed. */
  run(query: Prisma.Sql): Promise<number>;
}

/** The executor outside any transaction, which starts units of work. */
export interface SqlDriver extends SqlExecutor {
  /**
   * Runs `work` in one database transaction: committed when it resolves, rolled back when it throws. Prisma
   * statements issued inside `work` (the model API) run in the same transaction too.
   */
  transaction<T>(work: (executor: SqlExecutor) => Promise<T>): Promise<T>;
}

export type StatementListener = (sql: string) => void;

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

export class SqliteDriver implements SqlDriver {
  /** Prepared statements by SQL text: the adapter prepares every statement anew, the biggest cost it has. */
  private statements = new Map<string, Sqlite.Statement>();
  private statementsOf: Sqlite.Database | null = null;

  /** Reads outside units of work, on a connection of their own: see `all`. Opened on first use. */
  private reader: Sqlite.Database | null = null;
  private readonly readerStatements = new Map<string, Sqlite.Statement>();

  constructor(
    /** The adapter Prisma connected last (it reconnects after `$disconnect`). */
    private readonly adapter: () => SqliteAdapter,
    /** The database file, for the read connection. */
    private readonly file: string,
    private readonly onStatement?: StatementListener,
  ) {}

  /**
   * A read outside a unit of work runs on a read-only connection of its own. In WAL mode it sees only what has
   * committed: on the shared connection it would also see the writes of whatever unit of work is open there (a
   * unit spans awaits), so a live subscription could send an event, or take a log position, that a rollback
   * then takes back — and the next event would reuse that position unseen.
   */
  async all<Row>(query: Prisma.Sql): Promise<Row[]> {
    if (this.prepared(query.sql).readonly) return this.read(query.sql, query.values) as Row[];
    if (this.mustWaitForTransaction(query.sql)) return this.transaction((unit) => unit.all<Row>(query));
    return this.execute(query.sql, query.values, "all") as Row[];
  }

  /** Closes the read connection (the shared one is Prisma's). */
  close(): void {
    this.reader?.close();
    this.reader = null;
    this.readerStatements.clear();
  }

  private read(sql: string, values: readonly unknown[]): unknown[] {
    this.onStatement?.(sql);
    if (!this.reader) {
      this.reader = new Sqlite(this.file, { readonly: true, fileMustExist: true });
      // A reader waits only while SQLite recovers or resets the WAL, never for writers.
      this.reader.pragma("busy_timeout = 5000");
    }
    let statement = this.readerStatements.get(sql);
    if (!statement) {
      statement = this.reader.prepare(sql);
      this.readerStatements.set(sql, statement);
    }
    return statement.all(...values.map(sqliteValue));
  }

  async run(query: Prisma.Sql): Promise<number> {
    if (this.mustWaitForTransaction(query.sql)) return this.transaction((unit) => unit.run(query));
    return this.execute(query.sql, query.values, "run") as number;
  }

  /**
   * The connection is shared: while a unit of work (ours or Prisma's) is open on it, a statement sent from
   * outside joins that transaction. A write would be rolled back with a transaction it is no part of, so it
   * waits for the adapter's mutex and runs in a transaction of its own.
   */
  private mustWaitForTransaction(sql: string): boolean {
    return this.adapter().client.inTransaction && !this.prepared(sql).readonly;
  }

  async transaction<T>(work: (executor: SqlExecutor) => Promise<T>): Promise<T> {
    // The adapter's own transaction start: Prisma's transactions and ours take turns on one mutex.
    const transaction = await this.adapter().startTransaction();
    this.onStatement?.("BEGIN");
    const unit: SqlExecutor = {
      all: async <Row>(query: Prisma.Sql) => this.execute(query.sql, query.values, "all") as Row[],
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

  private execute(sql: string, values: readonly unknown[], mode: "all" | "run"): unknown[] | number {
    this.onStatement?.(sql);
    const statement = this.prepared(sql);
    const parameters = values.map(sqliteValue);
    if (mode === "all" && statement.reader) return statement.all(...parameters);
    const { changes } = statement.run(...parameters);
    return mode === "all" ? [] : changes;
  }

  private prepared(sql: string): Sqlite.Statement {
    const connection = this.adapter().client;
    if (this.statementsOf !== connection) {
      this.statements = new Map();
      this.statementsOf = connection;
    }
    let statement = this.statements.get(sql);
    if (!statement) {
      // Prisma's adapter turns safe integers on for the whole connection; the store's rows want numbers.
      statement = connection.prepare(sql).safeIntegers(false);
      this.statements.set(sql, statement);
    }
    return statement;
  }
}

/**
 * The pool connection of the unit of work running in the current async context, with its BEGIN. Prisma statements
 * that a unit of work issues (model API calls of stores not yet on the driver) run on it, once BEGIN has been
 * answered, so they are part of the transaction instead of waiting, on another connection, for row locks the
 * transaction holds.
 */
const unitConnection = new AsyncLocalStorage<{
  readonly connection: pg.PoolClient;
  readonly begun: Promise<unknown>;
}>();

/** The pool Prisma and the driver share; a Prisma statement issued inside a unit of work runs in that unit. */
export class UnitAwarePool extends pg.Pool {
  override query(...args: unknown[]): any {
    const unit = unitConnection.getStore();
    if (unit) {
      // Prisma's adapter awaits what query returns (no callbacks).
      return unit.begun.then(() =>
        (unit.connection.query as (...inner: unknown[]) => unknown).apply(unit.connection, args),
      );
    }
    return this.queryOutsideUnits(...args);
  }

  /** Any pooled connection, whatever unit of work the caller runs in. */
  queryOutsideUnits(...args: unknown[]): any {
    return (super.query as (...inner: unknown[]) => unknown).apply(this, args);
  }
}

/** `2026-01-02 03:04:05.006`: UTC, no zone, as @prisma/adapter-pg writes `timestamp(3)` values. */
function postgresTimestamp(date: Date): string {
  return date.toISOString().replace("T", " ").replace("Z", "");
}

function postgresValue(value: unknown): unknown {
  return value instanceof Date ? postgresTimestamp(value) : value;
}

/**
 * `timestamp` columns hold UTC without a zone: read them as UTC (node-postgres would read local time); int8
 * (counts, log positions) as numbers, which they always fit.
 */
const POSTGRES_TYPES = {
  getTypeParser(oid: number, format?: string): (text: string) => unknown {
    if (oid === pg.types.builtins.TIMESTAMP) return (text) => new Date(`${text.replace(" ", "T")}Z`);
    if (oid === pg.types.builtins.INT8) return Number;
    return pg.types.getTypeParser(oid, format as "text");
  },
};

type Queryable = Pick<pg.PoolClient, "query">;

async function postgresQuery(
  target: Queryable,
  query: Prisma.Sql | string,
  onStatement: StatementListener | undefined,
): Promise<pg.QueryResult> {
  const text = typeof query === "string" ? query : query.text;
  onStatement?.(text);
  const values = typeof query === "string" ? [] : query.values.map(postgresValue);
  return target.query({
    text,
    values,
    types: POSTGRES_TYPES,
    name: preparedName(text, values.length),
  } as pg.QueryConfig);
}

/**
 * The store's statements are prepared once per connection (node-postgres keeps a connection's named statements
 * and sends only Bind/Execute after the first use), so PostgreSQL stops parsing and planning them on every call:
 * that work ran on the same 2 cores as everything else. Statements with many parameters are the multi-row
 * INSERTs and long IN lists of bulk writes, whose text changes with their row count: they stay unnamed, so the
 * statements a connection keeps stay few. Transaction control ("BEGIN", "COMMIT") has nothing to plan.
 */
const PREPARED_MAX_PARAMETERS = 24;
const preparedNames = new Map<string, string>();

function preparedName(text: string, parameters: number): string | undefined {
  if (parameters === 0 || parameters > PREPARED_MAX_PARAMETERS) return undefined;
  let name = preparedNames.get(text);
  if (name === undefined) {
    name = `reftrail_${createHash("sha1").update(text).digest("hex")}`;
    preparedNames.set(text, name);
  }
  return name;
}

export class PostgresDriver implements SqlDriver {
  private readonly outsideUnits: Queryable;

  constructor(
    private readonly pool: UnitAwarePool,
    private readonly onStatement?: StatementListener,
  ) {
    this.outsideUnits = { query: ((config: pg.QueryConfig) => pool.queryOutsideUnits(config)) as Queryable["query"] };
  }

  // Outside a unit of work, like on SQLite: code running inside one that calls the driver itself (not the
  // unit's executor) gets another connection, whose writes are not rolled back with the unit.
  async all<Row>(query: Prisma.Sql): Promise<Row[]> {
    return (await postgresQuery(this.outsideUnits, query, this.onStatement)).rows as Row[];
  }

  async run(query: Prisma.Sql): Promise<number> {
    return (await postgresQuery(this.outsideUnits, query, this.onStatement)).rowCount ?? 0;
  }

  async transaction<T>(work: (executor: SqlExecutor) => Promise<T>): Promise<T> {
    const connection = await this.pool.connect();
    // A connection that breaks while checked out emits "error"; unhandled, that would end the process. The
    // statement running then rejects on its own, and the connection goes back to the pool as broken.
    const ignore = () => {};
    connection.on("error", ignore);
    let broken: Error | undefined;
    try {
      // The pool's connections pipeline (database.ts): BEGIN is not a round trip of its own but leaves with the
      // unit's first statements, when they are plain reads (the reference's lock and read, say). Anything else
      // waits for BEGIN's answer, so that nothing can ever write outside the transaction: had BEGIN failed, the
      // reads sent behind it would have run on their own, harmlessly, and their results are never used.
      const begun = postgresQuery(connection, "BEGIN", this.onStatement).catch((error: Error) => {
        broken = error;
        throw error;
      });
      begun.catch(ignore);
      let pipelining = true;
      const send = async (query: Prisma.Sql): Promise<pg.QueryResult> => {
        if (pipelining && isPlainRead(query.text)) {
          const [, result] = await Promise.all([begun, postgresQuery(connection, query, this.onStatement)]);
          return result;
        }
        // In the order asked: once one statement waits for BEGIN, every later one does.
        pipelining = false;
        await begun;
        return postgresQuery(connection, query, this.onStatement);
      };
      const unit: SqlExecutor = {
        all: async <Row>(query: Prisma.Sql) => (await send(query)).rows as Row[],
        run: async (query: Prisma.Sql) => (await send(query)).rowCount ?? 0,
      };
      try {
        const result = await unitConnection.run({ connection, begun }, () => work(unit));
        await begun;
        const commit = await postgresQuery(connection, "COMMIT", this.onStatement);
        // PostgreSQL answers the COMMIT of a transaction that a failed statement aborted with ROLLBACK, not an
        // error: had work caught that statement's error, the unit would otherwise pass for committed.
        if (commit.command !== "COMMIT")
          throw new Error(`COMMIT answered ${commit.command}: a statement of the unit failed`);
        return result;
      } catch (error) {
        // A connection that cannot even roll back is not given to anyone else.
        if (!broken) {
          await postgresQuery(connection, "ROLLBACK", this.onStatement).catch((rollbackError: Error) => {
            broken = rollbackError;
          });
        }
        throw error;
      }
    } finally {
      connection.removeListener("error", ignore);
      connection.release(broken);
    }
  }
}

/** A SELECT: it writes nothing, even run outside a transaction (a lock it takes is released at once). */
function isPlainRead(text: string): boolean {
  return /^\s*SELECT\b/i.test(text);
}
