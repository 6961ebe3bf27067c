import type pg from "pg";
import { POSTGRES_STATEMENTS_PER_CONNECTION, StatementCache, type StatementCacheStats } from "./statement-cache.ts";

/*
 * The store's statements are prepared once per connection (node-postgres keeps a connection's named statements
 * and sends only Bind/Execute after the first use), so PostgreSQL stops parsing and planning them on every call:
 * that work ran on the same 2 cores as everything else.
 *
 * A backend keeps each statement prepared on it until the statement is deallocated or the connection ends, and
 * node-postgres never deallocates: with one name per text for the whole process, every connection ended up
 * holding every text it had ever run (issue 34: 4,000 client-chosen texts grew the backends by 130 MB). So the
 * names are given per connection, from a bounded LRU of texts (statement-cache.ts): the text dropped from it is
 * deallocated on that connection, and should it come back it is prepared again under a new name. A name is
 * never reused on a connection, so no statement queued before the DEALLOCATE, nor any answer to it, can meet a
 * name that means something else.
 */

/**
 * Statements with many parameters are the multi-row INSERTs of bulk writes, whose text changes with their row
 * count: they stay unnamed, so the statements a connection keeps stay the store's own. Transaction control
 * ("BEGIN", "COMMIT") has nothing to plan.
 */
const PREPARED_MAX_PARAMETERS = 24;

/** node-postgres's record of what a connection has parsed: internal, read only to forget a deallocated name. */
interface ParsedStatements {
  readonly connection?: {
    readonly parsedStatements?: Record<string, string>;
    readonly submittedNamedStatements?: Record<string, string>;
  };
}

/** The names of the statements prepared on one connection. */
class ConnectionStatements {
  private readonly names: StatementCache<{ readonly name: string }>;
  private nextName = 1;

  constructor(
    private readonly client: pg.ClientBase,
    max: number,
  ) {
    this.names = new StatementCache("postgres_named", max, ({ name }) => this.deallocate(name));
  }

  nameOf(text: string): string {
    return this.names.get(text, () => ({ name: `reftrail_${this.nextName++}` })).name;
  }

  get size(): number {
    return this.names.size;
  }

  get evictions(): number {
    return this.names.evictions;
  }

  /**
   * Queued behind every statement already sent on the connection, so those still find the name. A name whose
   * Parse failed was never prepared: deallocating it would fail, and abort the transaction the connection is in.
   */
  private deallocate(name: string): void {
    const record = (this.client as unknown as ParsedStatements).connection;
    const parsed = record?.parsedStatements;
    if (parsed?.[name] === undefined && record?.submittedNamedStatements?.[name] === undefined) return;
    this.client.query(`DEALLOCATE ${name}`).then(
      () => delete parsed?.[name],
      () => {},
    );
  }
}

/** The statement names of an executor's connections, and their figures for /metrics. */
export class PostgresStatementNames {
  private readonly byConnection = new WeakMap<pg.ClientBase, ConnectionStatements>();
  /** Open connections' caches: their sizes add up to the metric's. */
  private readonly open = new Set<ConnectionStatements>();
  /** Evictions on connections that have ended. */
  private endedEvictions = 0;

  constructor(private readonly maxPerConnection = POSTGRES_STATEMENTS_PER_CONNECTION) {}

  /** `config` as it is sent on `client`: named when it is worth preparing. */
  on(client: pg.ClientBase, config: pg.QueryConfig): pg.QueryConfig {
    const parameters = config.values?.length ?? 0;
    if (parameters === 0 || parameters > PREPARED_MAX_PARAMETERS) return config;
    return { ...config, name: this.of(client).nameOf(config.text) };
  }

  stats(): StatementCacheStats {
    let size = 0;
    let evictions = this.endedEvictions;
    for (const statements of this.open) {
      size += statements.size;
      evictions += statements.evictions;
    }
    return { cache: "postgres_named", size, max: this.maxPerConnection, evictions };
  }

  private of(client: pg.ClientBase): ConnectionStatements {
    let statements = this.byConnection.get(client);
    if (statements === undefined) {
      const created = new ConnectionStatements(client, this.maxPerConnection);
      this.byConnection.set(client, created);
      this.open.add(created);
      // Its backend's statements end with it.
      client.once("end", () => {
        this.open.delete(created);
        this.endedEvictions += created.evictions;
      });
      statements = created;
    }
    return statements;
  }
}
