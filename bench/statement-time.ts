/*
 * The database's share of one request: the statements a request really sends (captured at the driver, so they
 * stay right whatever the store does), then each one timed on its own. PostgreSQL: `EXPLAIN (ANALYZE)` with the
 * captured parameters, execution and planning apart, medians of 5. SQLite: the prepared statement run on a read-only
 * connection, median of up to 200 runs (or one second). Writes are counted, not timed.
 *
 * The capture wraps `pg.Client.prototype.query` and better-sqlite3's `Statement` methods in this process while
 * one request goes through an in-process server (`inject`, so no socket is involved). A warm-up request with
 * other keys goes first so that start-up statements (key lookups, data versions) are not counted.
 */
import Sqlite from "better-sqlite3";
import pg from "pg";
import { sqliteFilePath } from "../src/store/database.ts";
import { SESSION_SETTINGS } from "../src/store/sql/postgres-session.ts";
import { startBenchApp } from "./bench-app.ts";
import { BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";
import type { Kind } from "./seed.ts";

export interface TimedRequest {
  readonly name: string;
  readonly method: "GET" | "POST";
  /** The warm-up request, then the measured one (same shape, other keys). */
  readonly warmup: { readonly path: string; readonly body?: string };
  readonly measured: { readonly path: string; readonly body?: string };
}

export interface StatementTiming {
  readonly request: string;
  /** Statements sent, reads and writes (BEGIN/COMMIT included). */
  readonly statements: number;
  /** The timed reads: SQL (whitespace folded), execution and (PostgreSQL) planning milliseconds. */
  readonly reads: { readonly sql: string; readonly ms: number; readonly planningMs: number }[];
  /** Execution time of the reads, summed. */
  readonly totalMs: number;
  /** PostgreSQL: planning time of the reads, summed (a prepared statement's cached plan skips it); SQLite: 0. */
  readonly planningMs: number;
}

interface Captured {
  readonly sql: string;
  readonly values: readonly unknown[];
}

let capturing: Captured[] | null = null;
let installed = false;

function installCapture(): void {
  if (installed) return;
  installed = true;
  const clientPrototype = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const query = clientPrototype.query;
  clientPrototype.query = function (this: unknown, ...args: unknown[]) {
    const [config, values] = args;
    if (capturing && typeof config === "string") {
      capturing.push({ sql: config, values: Array.isArray(values) ? values : [] });
    } else if (capturing && typeof config === "object" && config !== null) {
      const { text, values: configValues } = config as { text?: unknown; values?: unknown[] };
      if (typeof text === "string") capturing.push({ sql: text, values: configValues ?? [] });
    }
    return query.apply(this, args);
  };
  const scratch = new Sqlite(":memory:");
  const statementPrototype = Object.getPrototypeOf(scratch.prepare("SELECT 1")) as Record<string, unknown>;
  scratch.close();
  for (const method of ["all", "get", "run", "iterate"]) {
    const original = statementPrototype[method] as (...args: unknown[]) => unknown;
    statementPrototype[method] = function (this: { source: string }, ...args: unknown[]) {
      capturing?.push({ sql: this.source, values: args });
      return original.apply(this, args);
    };
  }
}

const isRead = (sql: string) => /^\s*(SELECT|WITH)\b/i.test(sql) && !/\bFOR\s+(UPDATE|SHARE)\b/i.test(sql);
const fold = (sql: string) => sql.replace(/\s+/g, " ").trim();
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function capture(url: string, apiKey: string, requests: readonly TimedRequest[]): Promise<Captured[][]> {
  installCapture();
  // SQLite's pages on the event loop's connection: the capture sees only this thread's statements.
  const app = await startBenchApp(url, {
    WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY,
    WEBHOOK_WORKER: "off",
    SQLITE_READ_THREAD: "off",
  });
  try {
    const captured: Captured[][] = [];
    for (const request of requests) {
      const send = async (target: { path: string; body?: string }) => {
        const response = await app.http.inject({
          method: request.method,
          url: target.path,
          headers: { "x-api-key": apiKey, "cache-control": "no-cache", "content-type": "application/json" },
          ...(target.body !== undefined && { payload: target.body }),
        });
        if (response.statusCode !== 200) throw new Error(`${request.name}: ${response.statusCode} ${response.body}`);
      };
      await send(request.warmup);
      capturing = [];
      try {
        await send(request.measured);
        captured.push(capturing);
      } finally {
        capturing = null;
      }
    }
    return captured;
  } finally {
    await app.close();
  }
}

interface Timed {
  readonly ms: number;
  readonly planningMs: number;
}

async function timePostgres(url: string, statements: readonly Captured[]): Promise<Timed[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  // Planned as on the store's own connections.
  await client.query(SESSION_SETTINGS);
  try {
    const times: Timed[] = [];
    for (const statement of statements) {
      const runs: number[] = [];
      const planning: number[] = [];
      for (let i = 0; i < 5; i++) {
        const { rows } = await client.query<{ "QUERY PLAN": [{ "Planning Time": number; "Execution Time": number }] }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) ${statement.sql}`,
          [...statement.values],
        );
        const plan = rows[0]!["QUERY PLAN"][0];
        runs.push(plan["Execution Time"]);
        planning.push(plan["Planning Time"]);
      }
      times.push({ ms: median(runs), planningMs: median(planning) });
    }
    return times;
  } finally {
    await client.end();
  }
}

function timeSqlite(url: string, statements: readonly Captured[]): Timed[] {
  const db = new Sqlite(sqliteFilePath(url), { readonly: true });
  try {
    return statements.map((statement) => {
      const prepared = db.prepare(statement.sql);
      const runs: number[] = [];
      const until = performance.now() + 1_000;
      for (let i = 0; i < 205 && performance.now() < until; i++) {
        const start = performance.now();
        prepared.all(...statement.values);
        if (i >= 5) runs.push(performance.now() - start);
      }
      return { ms: median(runs.length ? runs : [Number.NaN]), planningMs: 0 };
    });
  } finally {
    db.close();
  }
}

/** Captures each request's statements, then times its reads on their own (the server is stopped by then). */
export async function measureStatementTime(
  kind: Kind,
  url: string,
  apiKey: string,
  requests: readonly TimedRequest[],
): Promise<StatementTiming[]> {
  const captured = await capture(url, apiKey, requests);
  const timings: StatementTiming[] = [];
  for (const [index, request] of requests.entries()) {
    const statements = captured[index]!;
    const reads = statements.filter((statement) => isRead(statement.sql));
    const timed = kind === "postgres" ? await timePostgres(url, reads) : timeSqlite(url, reads);
    timings.push({
      request: request.name,
      statements: statements.length,
      reads: reads.map((statement, i) => ({ sql: fold(statement.sql), ...timed[i]! })),
      totalMs: timed.reduce((sum, value) => sum + value.ms, 0),
      planningMs: timed.reduce((sum, value) => sum + value.planningMs, 0),
    });
  }
  return timings;
}
