import pg from "pg";
import type { Prisma } from "./sql-template.ts";
import type { SqlExecutor, StatementListener, TransactionalExecutor } from "./executor.ts";
import { PostgresReadLanes } from "./postgres-read-lanes.ts";
import { SESSION_SETTINGS } from "./postgres-session.ts";
import { PostgresStatementNames } from "./postgres-statement-names.ts";
import type { StatementCacheStats } from "./statement-cache.ts";
import { storedDate } from "./stored-dates.ts";

/*
 * PostgreSQL: the executor's own node-postgres connections. Plain reads sent outside a unit of work (the reads
 * of the API, nearly all of its statements) go down a few shared, pipelined connections, batched per event-loop
 * turn (postgres-read-lanes.ts). Units of work (every write) take connections from a pool of their own, and so
 * do the few statements outside units that are not plain reads. With one pool for everything, a saturating read
 * load kept its queue dozens of statements long and each write's transaction waited at its end for a
 * connection: hundreds of milliseconds under the bench's reads, most of a write's time on the server
 * (docs/benchmarks.md). Apart, a write waits only for other writes.
 */

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
    if (oid === pg.types.builtins.TIMESTAMP) return readTimestamp;
    if (oid === pg.types.builtins.INT8) return Number;
    return pg.types.getTypeParser(oid, format as "text");
  },
};

/** A `timestamp` column's text: by hand in its usual form (see storedDate), else by Date's parser. */
function readTimestamp(text: string): Date {
  return storedDate(text) ?? new Date(`${text.replace(" ", "T")}Z`);
}

/** Where a statement is sent: a read lane, a pooled connection, or the connection of a unit of work. */
interface Queryable {
  query(config: pg.QueryConfig): Promise<pg.QueryResult>;
}

async function postgresQuery(
  target: Queryable,
  query: Prisma.Sql | string,
  onStatement: StatementListener | undefined,
  asArrays = false,
  // Prisma.Sql builds its text anew on every read of `text`: a caller that has read it passes it on.
  text = typeof query === "string" ? query : query.text,
): Promise<pg.QueryResult> {
  onStatement?.(text);
  const values = typeof query === "string" ? [] : query.values.map(postgresValue);
  return target.query({
    text,
    values,
    types: POSTGRES_TYPES,
    ...(asArrays ? { rowMode: "array" } : {}),
  } as pg.QueryConfig);
}

/** Connections of each pool, at most (node-postgres's default). */
const POOL_SIZE = 10;

/**
 * Pipelined connections for plain reads: PostgreSQL answers each lane's statements in order, so lanes are what
 * its backends work on at once. Measured on 2 cores with the GraphQL reference under 50 connections: 1 lane
 * 798 req/s, 2 lanes 792, 4 lanes 668 (more backends competing for the same cores); two, so that one long read
 * does not stop every other.
 */
const READ_LANES = 2;

/**
 * The units' pool never closes a connection for being idle (it keeps up to POOL_SIZE; node-postgres closes idle
 * ones after 10 s otherwise). A write that has to open a connection waits for PostgreSQL to start a backend and
 * for the session's settings, and then prepares its statements anew on it: under saturating reads, 100–300 ms.
 * Closed after ten quiet seconds, the connections were opened again by the next burst of writes, each write of
 * the burst waiting for one: the bench's feed of 100 writes a second beside saturating PostgreSQL reads, started
 * after 13 idle seconds, saw a p99 of 417–742 ms, 110–159 ms with the connections kept (pool waits p99 155–249
 * against 3–4 ms on the server). The other pool keeps node-postgres's default: what it carries is rarely a burst.
 */
const UNITS_KEEP_IDLE_CONNECTIONS = POOL_SIZE;

function openPool(url: string, keptOpen = 0): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, pipeline: true, max: POOL_SIZE, min: keptOpen });
  // An idle connection that breaks (the server restarts) is dropped by the pool; the next query reconnects.
  pool.on("error", () => {});
  // A connection the server ends (failover, pg_terminate_backend, a pooler restart) emits "error", and an
  // "error" event with no listener ends the process. pg-pool listens only while a connection is idle: between
  // checkout and the borrower's own listener, and after a once-listener has fired (pool.query), nothing
  // does. This listener stays for the connection's whole life; the statement in flight still rejects on its
  // own, and the borrower releases the broken connection.
  pool.on("connect", (connection) => {
    connection.on("error", () => {});
    // Queued before the statement of whoever takes the connection; should it fail, so does that statement.
    connection.query(SESSION_SETTINGS).catch(() => {});
  });
  return pool;
}

export class PostgresExecutor implements TransactionalExecutor {
  /** Plain reads outside units of work. */
  private readonly reads: PostgresReadLanes;
  /** Other statements outside units of work. */
  private readonly pool: pg.Pool;
  /** Units of work only: a write never waits for a connection behind the reads' statements. */
  private readonly unitPool: pg.Pool;
  /** The names of the statements prepared on each connection (postgres-statement-names.ts). */
  private readonly names = new PostgresStatementNames();
  /** Statements outside units of work that are not plain reads: on a connection of the pool. */
  private readonly pooled: Queryable;

  constructor(
    url: string,
    private readonly onStatement?: StatementListener,
  ) {
    this.reads = new PostgresReadLanes(url, READ_LANES, this.names);
    this.pool = openPool(url);
    this.unitPool = openPool(url, UNITS_KEEP_IDLE_CONNECTIONS);
    this.pooled = { query: (config) => this.onPooledConnection(config) };
  }

  statementCaches(): StatementCacheStats[] {
    return [this.names.stats()];
  }

  /**
   * `pool.query`, with the statement named for the connection it lands on. As there, a connection whose
   * statement failed is not given back.
   */
  private async onPooledConnection(config: pg.QueryConfig): Promise<pg.QueryResult> {
    const connection = await this.pool.connect();
    try {
      const result = await connection.query(this.names.on(connection, config));
      connection.release();
      return result;
    } catch (error) {
      connection.release(error as Error);
      throw error;
    }
  }

  async all<Row>(query: Prisma.Sql): Promise<Row[]> {
    return (await this.send(query)).rows as Row[];
  }

  async values(query: Prisma.Sql): Promise<unknown[][]> {
    return (await this.send(query, true)).rows as unknown[][];
  }

  async run(query: Prisma.Sql): Promise<number> {
    return (await this.send(query)).rowCount ?? 0;
  }

  async close(): Promise<void> {
    await Promise.all([this.reads.close(), this.pool.end(), this.unitPool.end()]);
  }

  /** A statement outside units of work: a plain read down the read lanes, anything else through the pool. */
  private send(query: Prisma.Sql, asArrays = false): Promise<pg.QueryResult> {
    const text = query.text;
    return postgresQuery(goesDownLanes(text) ? this.reads : this.pooled, query, this.onStatement, asArrays, text);
  }

  async transaction<T>(work: (unit: SqlExecutor) => Promise<T>): Promise<T> {
    const connection = await this.unitPool.connect();
    const onConnection: Queryable = { query: (config) => connection.query(this.names.on(connection, config)) };
    // A connection that breaks while checked out emits "error"; unhandled, that would end the process. The
    // statement running then rejects on its own, and the connection goes back to the pool as broken.
    const ignore = () => {};
    connection.on("error", ignore);
    let broken: Error | undefined;
    try {
      // BEGIN is not a round trip of its own but leaves with the unit's first statements, when they are plain
      // reads (the reference's lock and read, say). Anything else waits for BEGIN's answer, so that nothing can
      // ever write outside the transaction: had BEGIN failed, the reads sent behind it would have run on their
      // own, harmlessly, and their results are never used.
      const begun = postgresQuery(onConnection, "BEGIN", this.onStatement).catch((error: Error) => {
        broken = error;
        throw error;
      });
      begun.catch(ignore);
      let pipelining = true;
      const send = async (query: Prisma.Sql, asArrays = false): Promise<pg.QueryResult> => {
        if (pipelining && isPlainRead(query.text)) {
          const [, result] = await Promise.all([begun, postgresQuery(onConnection, query, this.onStatement, asArrays)]);
          return result;
        }
        // In the order asked: once one statement waits for BEGIN, every later one does.
        pipelining = false;
        await begun;
        return postgresQuery(onConnection, query, this.onStatement, asArrays);
      };
      const unit: SqlExecutor = {
        all: async <Row>(query: Prisma.Sql) => (await send(query)).rows as Row[],
        values: async (query: Prisma.Sql) => (await send(query, true)).rows as unknown[][],
        run: async (query: Prisma.Sql) => (await send(query)).rowCount ?? 0,
      };
      try {
        const result = await work(unit);
        await begun;
        const commit = await postgresQuery(onConnection, "COMMIT", this.onStatement);
        // PostgreSQL answers the COMMIT of a transaction that a failed statement aborted with ROLLBACK, not an
        // error: had work caught that statement's error, the unit would otherwise pass for committed.
        if (commit.command !== "COMMIT")
          throw new Error(`COMMIT answered ${commit.command}: a statement of the unit failed`);
        return result;
      } catch (error) {
        // A connection that cannot even roll back is not given to anyone else.
        if (!broken) {
          await postgresQuery(onConnection, "ROLLBACK", this.onStatement).catch((rollbackError: Error) => {
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

/** A row-locking clause: FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE, FOR KEY SHARE. */
const ROW_LOCKING = /\bFOR\s+(?:NO\s+KEY\s+UPDATE|UPDATE|SHARE|KEY\s+SHARE)\b/i;

/**
 * A read that may share a pipelined read connection: a SELECT that takes no row lock, so it never waits for a
 * writer's transaction, and nothing queued behind it on the same connection waits for one either.
 */
function goesDownLanes(text: string): boolean {
  return isPlainRead(text) && !ROW_LOCKING.test(text);
}
