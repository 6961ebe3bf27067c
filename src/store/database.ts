import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { PrismaBetterSqlite3 } from "@prisma/adapter-better-sqlite3";
import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient as SqlitePrismaClient } from "./__generated__/sqlite/client.ts";
import { PrismaClient as PostgresPrismaClient } from "./__generated__/postgres/client.ts";
import { startSqliteCheckpointer } from "./sqlite-checkpointer.ts";
import { PostgresDriver, SqliteDriver, UnitAwarePool, type SqlDriver, type SqliteAdapter } from "./sql-executor.ts";

export type DatabaseProvider = "sqlite" | "postgres";

/**
 * The two generated clients have the same models and the same query API; the store is typed against the
 * SQLite one and only uses features both providers support (no `mode: "insensitive"`, no `skipDuplicates`).
 */
export type PrismaClient = SqlitePrismaClient;
export type PrismaTransaction = Parameters<Parameters<PrismaClient["$transaction"]>[0]>[0];

export interface Database {
  readonly provider: DatabaseProvider;
  readonly url: string;
  readonly prisma: PrismaClient;
  /** The store's statements on Prisma's own connections, without Prisma's per-statement cost. */
  readonly sql: SqlDriver;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** Called with every SQL statement sent, by Prisma or by the driver; tests count statements through it. */
  readonly onQuery?: (sql: string) => void;
}

export function providerOf(url: string): DatabaseProvider {
  if (url.startsWith("postgres://") || url.startsWith("postgresql://")) return "postgres";
  if (url.startsWith("file:")) return "sqlite";
  throw new Error(`DATABASE_URL must start with file: (SQLite) or postgresql:// (PostgreSQL)`);
}

/** `file:./data/reftrail.db` -> absolute path, relative to the working directory like the CLI's. */
export function sqliteFilePath(url: string): string {
  const path = url.slice("file:".length).replace(/\?.*$/, "");
  return resolve(path);
}

/** Prisma's better-sqlite3 adapter factory, keeping the adapter (and so the connection) it creates. */
class SharedSqliteConnection extends PrismaBetterSqlite3 {
  adapter: SqliteAdapter | null = null;

  override async connect(): ReturnType<PrismaBetterSqlite3["connect"]> {
    const adapter = await super.connect();
    this.adapter = adapter as unknown as SqliteAdapter;
    return adapter;
  }
}

export async function openDatabase(url: string, options: OpenDatabaseOptions = {}): Promise<Database> {
  const provider = providerOf(url);
  const log = options.onQuery ? [{ emit: "event" as const, level: "query" as const }] : [];
  let prisma: PrismaClient;
  let sql: SqlDriver;
  let closeDriver = async () => {};
  if (provider === "sqlite") {
    const file = sqliteFilePath(url);
    mkdirSync(dirname(file), { recursive: true });
    const factory = new SharedSqliteConnection({ url: `file:${file}` });
    prisma = new SqlitePrismaClient({ adapter: factory, log });
    // WAL lets readers run beside the single writer; busy_timeout makes a second process wait for the write
    // lock instead of failing at once; SQLite enforces foreign keys only when asked, per connection.
    await prisma.$queryRawUnsafe("PRAGMA journal_mode = WAL");
    await prisma.$queryRawUnsafe("PRAGMA busy_timeout = 5000");
    await prisma.$queryRawUnsafe("PRAGMA foreign_keys = ON");
    await prisma.$queryRawUnsafe("PRAGMA synchronous = NORMAL");
    // Checkpoints (the only fsyncs in WAL mode) run on a thread of their own, not in a request's COMMIT.
    await prisma.$queryRawUnsafe("PRAGMA wal_autocheckpoint = 0");
    const checkpointer = startSqliteCheckpointer(file);
    const driver = new SqliteDriver(
      () => {
        if (!factory.adapter) throw new Error("the SQLite connection is not open");
        return factory.adapter;
      },
      file,
      options.onQuery,
    );
    closeDriver = async () => {
      driver.close();
      await checkpointer.stop();
    };
    sql = driver;
  } else {
    // One pool for Prisma and the driver: the connection limit stays the one Prisma had. Its connections pipeline
    // (node-postgres sends a statement without waiting for the previous one's answer): only a unit of work ever
    // has several in flight (src/store/sql-executor.ts), each still answered, or failed, on its own.
    const pool = new UnitAwarePool({ connectionString: url, pipeline: true });
    // An idle connection that breaks (the server restarts) is dropped by the pool; the next query reconnects.
    pool.on("error", () => {});
    // A connection the server ends (failover, pg_terminate_backend, a pooler restart) emits "error", and an
    // "error" event with no listener ends the process. pg-pool listens only while a connection is idle: between
    // checkout and the borrower's own listener, and after a once-listener has fired (pool.query), nothing
    // does. This listener stays for the connection's whole life; the statement in flight still rejects on its
    // own, and the borrower releases the broken connection.
    pool.on("connect", (connection) => connection.on("error", () => {}));
    const client = new PostgresPrismaClient({ adapter: new PrismaPg(pool), log });
    prisma = client as unknown as PrismaClient;
    sql = new PostgresDriver(pool, options.onQuery);
    closeDriver = () => pool.end();
  }
  if (options.onQuery) {
    const onQuery = options.onQuery;
    (prisma as unknown as { $on(event: "query", cb: (e: { query: string }) => void): void }).$on("query", (e) =>
      onQuery(e.query),
    );
  }
  return {
    provider,
    url,
    prisma,
    sql,
    close: async () => {
      await prisma.$disconnect();
      await closeDriver();
    },
  };
}
