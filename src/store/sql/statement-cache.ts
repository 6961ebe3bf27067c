import { LRUCache } from "lru-cache";

/*
 * The executors keep what the database made of a statement's text (a prepared better-sqlite3 Statement, a named
 * PostgreSQL statement) to skip parsing and planning it again. Each such cache is bounded: a client that could
 * make the store's texts vary (a filter list of any length used to give one text per length) would otherwise
 * grow the process, or every PostgreSQL backend, by one statement per text, for ever (issue 34; docs/decisions.md,
 * "Bounded statement caches"). The least recently used statement goes first; one evicted and then used again is
 * prepared again, which costs what a first use costs.
 */

/**
 * Statements kept per SQLite connection (the shared connection, the event loop's reader, the read thread's).
 * The store has about 110 call sites of its executor, some of a few texts each, client-chosen filters included
 * (lists are one bound parameter each, src/store/sql/value-lists.ts); a prepared statement holds some 20–60 KB.
 */
export const SQLITE_STATEMENTS_PER_CONNECTION = 500;

/**
 * Named statements per PostgreSQL connection. Each is kept by its backend (a parse tree and plans) until it is
 * deallocated; 256 hold every statement the store sends in steady state.
 */
export const POSTGRES_STATEMENTS_PER_CONNECTION = 256;

/** What /metrics tells about one kind of statement cache (src/operations.ts). */
export interface StatementCacheStats {
  /** Which cache: `sqlite_writer`, `sqlite_reader`, `sqlite_read_thread`, `postgres_named`. */
  readonly cache: string;
  /** Statements kept now (for PostgreSQL: summed over the open connections). */
  readonly size: number;
  /** The bound, per connection. */
  readonly max: number;
  /** Statements dropped to stay within the bound, since the process started. */
  readonly evictions: number;
}

/** Statements of one connection by their SQL text, the least recently used dropped past `max`. */
export class StatementCache<Statement extends object> {
  private readonly statements: LRUCache<string, Statement>;
  private evicted = 0;

  constructor(
    readonly name: string,
    readonly max: number,
    /** Told of a statement dropped to make room (to free what the database keeps for it). */
    onEvict?: (statement: Statement, sql: string) => void,
  ) {
    this.statements = new LRUCache<string, Statement>({
      max,
      dispose: (statement, sql, reason) => {
        if (reason !== "evict") return;
        this.evicted++;
        onEvict?.(statement, sql);
      },
    });
  }

  /** The statement kept for `sql`, or the one `prepare` makes, kept from now on. */
  get(sql: string, prepare: () => Statement): Statement {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = prepare();
      this.statements.set(sql, statement);
    }
    return statement;
  }

  get size(): number {
    return this.statements.size;
  }

  get evictions(): number {
    return this.evicted;
  }

  /** Forgets every statement (the connection closed), without counting them as evicted. */
  clear(): void {
    this.statements.clear();
  }

  stats(): StatementCacheStats {
    return { cache: this.name, size: this.size, max: this.max, evictions: this.evicted };
  }
}
