import {
  context,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Span,
  type Tracer,
} from "@opentelemetry/api";
import type { Database, DatabaseProvider } from "../database.ts";
import type { ReadOptions, SqlExecutor, TransactionalExecutor } from "./executor.ts";
import type { Prisma } from "./sql-template.ts";
import type { StatementCacheStats } from "./statement-cache.ts";

/*
 * A span per statement (kind client), a child of whatever span is active where the statement is sent (the GraphQL
 * operation or the HTTP request that needs it; none for the background's statements, which are traces of their
 * own). It wraps the executor only when tracing is on (src/app.ts): with tracing off a statement costs what it did.
 *
 * A statement sent with no span active (the background's: the webhook worker's claims, the live feed's reads, the
 * replays' look for work; or one shared by a turn's requests) is recorded only when it did something: it returned a
 * row, changed one, or failed. Background work polls: an idle server's worker claims nothing twice a second, and
 * each poll would be a trace of one span saying so. Such a statement's span is made once it has answered, with the
 * times it was sent and answered. Units of work (transactions) are always recorded: the background opens one only
 * for work it has found.
 *
 * Chosen (issue 37) over node-postgres's instrumentation (better-sqlite3 has none in OpenTelemetry's contrib set),
 * which patches the driver as modules load (ES modules need a loader hook for it) and sees statements as the
 * driver does: on PostgreSQL the pipelined read lanes' statements leave in batches on shared connections
 * (postgres-read-lanes.ts). Here every statement is seen once, where the store sends it, in its caller's context.
 *
 * What a span carries: the statement's name (`db.query.summary`, its operation and first table, e.g.
 * `SELECT shipping_references`), the database system, and its text as the store builds it — a template whose values
 * are bound parameters (sql-template.ts), never in the text. Bound values are never recorded.
 */

const DB_SYSTEM_NAME = "db.system.name";
/** The older attribute name, which many trace backends still read. */
const DB_SYSTEM = "db.system";
const DB_QUERY_SUMMARY = "db.query.summary";
const DB_OPERATION_NAME = "db.operation.name";
const DB_COLLECTION_NAME = "db.collection.name";
const DB_QUERY_TEXT = "db.query.text";

/** Statements' spans' attributes by text, at most this many (emptied when full: an entry costs one match to make). */
const MAX_STATEMENTS = 1_000;

/** A parenthesized part holding no other: subqueries and common table expressions are set aside innermost first. */
const INNERMOST_PARENTHESES = /\([^()]*\)/g;
/** What a parenthesized part leaves at the top level: no name, so `FROM (SELECT …) AS r` names no table `AS`. */
const SET_ASIDE = "[]";
const OPERATION = /\b(SELECT|INSERT|UPDATE|DELETE)\b/i;
const TABLE = /\b(?:FROM|INTO|UPDATE|JOIN)\s+"?([A-Za-z_][A-Za-z0-9_]*)"?/i;

/**
 * A statement's name: its operation and the first table it names, both at its top level (outside subqueries
 * and common table expressions), falling back to the first table named anywhere: `SELECT shipping_references`,
 * `UPDATE webhook_deliveries`.
 */
export function statementNameOf(text: string): StatementName {
  let top = text;
  for (let previous = ""; previous !== top;) {
    previous = top;
    top = top.replace(INNERMOST_PARENTHESES, SET_ASIDE);
  }
  const operation = (OPERATION.exec(top)?.[1] ?? OPERATION.exec(text)?.[1] ?? "SQL").toUpperCase();
  const table = TABLE.exec(top)?.[1] ?? TABLE.exec(text)?.[1];
  return { summary: table ? `${operation} ${table}` : operation, operation, table };
}

interface StatementName {
  readonly summary: string;
  readonly operation: string;
  readonly table: string | undefined;
}

const STATEMENT_SPAN_OPTIONS = { kind: SpanKind.CLIENT } as const;

/** What every span of one statement text carries, made once per text (the SDK copies it into each span). */
interface StatementSpan {
  readonly name: string;
  readonly attributes: Attributes;
}

/** The executor `inner`, with a span per statement and per unit of work. */
export class TracedExecutor implements TransactionalExecutor {
  private readonly statements = new Map<string, StatementSpan>();
  private readonly system: string;

  constructor(
    private readonly inner: TransactionalExecutor,
    private readonly tracer: Tracer,
    private readonly provider: DatabaseProvider,
  ) {
    this.system = provider === "postgres" ? "postgresql" : "sqlite";
  }

  all<Row>(query: Prisma.Sql): Promise<Row[]> {
    return this.traced(query, () => this.inner.all<Row>(query), returnedRows);
  }

  values(query: Prisma.Sql, options?: ReadOptions): Promise<unknown[][]> {
    return this.traced(query, () => this.inner.values(query, options), returnedRows);
  }

  run(query: Prisma.Sql): Promise<number> {
    return this.traced(query, () => this.inner.run(query), changedRows);
  }

  /** A span for the unit of work (BEGIN to COMMIT), the parent of its statements' spans. */
  transaction<T>(work: (unit: SqlExecutor) => Promise<T>): Promise<T> {
    const span = this.tracer.startSpan("transaction", {
      kind: SpanKind.CLIENT,
      attributes: { [DB_SYSTEM_NAME]: this.system, [DB_SYSTEM]: this.system },
    });
    const unitContext = trace.setSpan(context.active(), span);
    return ended(
      span,
      context.with(unitContext, () =>
        this.inner.transaction((unit) =>
          work({
            all: <Row>(query: Prisma.Sql) => this.traced(query, () => unit.all<Row>(query), returnedRows),
            values: (query: Prisma.Sql, options?: ReadOptions) =>
              this.traced(query, () => unit.values(query, options), returnedRows),
            run: (query: Prisma.Sql) => this.traced(query, () => unit.run(query), changedRows),
          }),
        ),
      ),
    );
  }

  close(): Promise<void> {
    return this.inner.close();
  }

  statementCaches(): StatementCacheStats[] {
    return this.inner.statementCaches();
  }

  private traced<T>(query: Prisma.Sql, send: () => Promise<T>, didWork: (result: T) => boolean): Promise<T> {
    // The text in the database's own placeholder style: `?` on SQLite, `$1` on PostgreSQL.
    const statement = this.statementOf(this.provider === "postgres" ? query.text : query.sql);
    if (trace.getSpan(context.active()) === undefined) return this.tracedIfItDidWork(statement, send, didWork);
    // The attributes are set on the started span rather than given to `startSpan`, which copies and checks them
    // twice more for its sampler; the samplers OTEL_TRACES_SAMPLER names do not read attributes.
    const span = this.tracer.startSpan(statement.name, STATEMENT_SPAN_OPTIONS).setAttributes(statement.attributes);
    return ended(span, sentBy(send));
  }

  /** A statement of no request's (no span active): its span, a root, made once it has answered, if it did work. */
  private tracedIfItDidWork<T>(
    statement: StatementSpan,
    send: () => Promise<T>,
    didWork: (result: T) => boolean,
  ): Promise<T> {
    // performance.now() times: the SDK takes them as such (and adds the time origin).
    const startTime = performance.now();
    const startSpan = () =>
      this.tracer
        .startSpan(statement.name, { kind: SpanKind.CLIENT, startTime }, ROOT_CONTEXT)
        .setAttributes(statement.attributes);
    return sentBy(send).then(
      (result) => {
        if (didWork(result)) startSpan().end(performance.now());
        return result;
      },
      (error: unknown) => ended(startSpan(), Promise.reject(error as Error)),
    );
  }

  private statementOf(text: string): StatementSpan {
    let statement = this.statements.get(text);
    if (statement) return statement;
    const name = statementNameOf(text);
    statement = {
      name: name.summary,
      attributes: {
        [DB_SYSTEM_NAME]: this.system,
        [DB_SYSTEM]: this.system,
        [DB_QUERY_SUMMARY]: name.summary,
        [DB_OPERATION_NAME]: name.operation,
        ...(name.table ? { [DB_COLLECTION_NAME]: name.table } : {}),
        [DB_QUERY_TEXT]: text,
      },
    };
    if (this.statements.size >= MAX_STATEMENTS) this.statements.clear();
    this.statements.set(text, statement);
    return statement;
  }
}

/** What `send` sends, a throw turned into a rejection. */
function sentBy<T>(send: () => Promise<T>): Promise<T> {
  try {
    return send();
  } catch (error) {
    return Promise.reject(error as Error);
  }
}

/** Whether a read returned a row. */
const returnedRows = (rows: readonly unknown[]): boolean => rows.length > 0;
/** Whether a write changed a row. */
const changedRows = (count: number): boolean => count > 0;

/** `result`, ending `span` when it settles (an error recorded as the span's status). */
function ended<T>(span: Span, result: Promise<T>): Promise<T> {
  return result.then(
    (value) => {
      span.end();
      return value;
    },
    (error: unknown) => {
      // The driver's code (SQLSTATE, SQLITE_*), never its message: a message may quote a value.
      const code = (error as { code?: unknown } | null)?.code;
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.setAttribute("error.type", typeof code === "string" ? code : error instanceof Error ? error.name : "error");
      span.end();
      throw error;
    },
  );
}

/** `database` with a span per statement of its executor (Prisma's client, which the server never uses, as it is). */
export function withTracedStatements(database: Database, tracer: Tracer): Database {
  const sql = new TracedExecutor(database.sql, tracer, database.provider);
  return {
    provider: database.provider,
    url: database.url,
    get prisma() {
      return database.prisma;
    },
    sql,
    close: () => database.close(),
  };
}
