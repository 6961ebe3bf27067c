import { PrismaBetterSqlite3 } from "@prisma/adapter-better-sqlite3";
import type { Pool } from "pg";
import type { PrismaClient as SqlitePrismaClient } from "../__generated__/sqlite/client.ts";
import type { SqliteAdapter } from "../sql/sqlite-executor.ts";

/*
 * The schema-driven clients of record, generated from prisma/sqlite/schema.prisma and its PostgreSQL copy. The
 * server and the `reftrail` command run every statement as SQL on the executors (src/store/sql/); Prisma's model
 * API serves the tests, which read and alter rows directly. Loading a generated client (Prisma's runtime, then its WebAssembly query
 * compiler on the first query) costs more CPU than the rest of a command and a fifth of a start, so a process
 * that opens the database with `prismaClient: false` never loads it, and the others make the client on first use.
 */

/**
 * The two generated clients have the same models and the same query API; the store is typed against the
 * SQLite one and only uses features both providers support (no `mode: "insensitive"`, no `skipDuplicates`).
 */
export type PrismaClient = SqlitePrismaClient;
export type PrismaTransaction = Parameters<Parameters<PrismaClient["$transaction"]>[0]>[0];

/** Connections Prisma's own PostgreSQL pool may open: it serves the tests only. */
const PRISMA_POOL_SIZE = 4;

type QueryLog = { emit: "event"; level: "query" }[];

/** The database was opened with `prismaClient: false`, and something asked for the client all the same. */
const NOT_LOADED = "Prisma's client was not loaded: this database was opened with { prismaClient: false }";

function logQueries(prisma: PrismaClient, onQuery: ((sql: string) => void) | undefined): PrismaClient {
  if (onQuery) {
    (prisma as unknown as { $on(event: "query", cb: (e: { query: string }) => void): void }).$on("query", (e) =>
      onQuery(e.query),
    );
  }
  return prisma;
}

type ConnectedAdapter = Awaited<ReturnType<PrismaBetterSqlite3["connect"]>>;

/**
 * Prisma's better-sqlite3 adapter factory, keeping the adapter (and so the connection) it creates: the store
 * connects it first, and Prisma's client, made only when something uses it, connects to that same adapter.
 */
class SharedSqliteConnection extends PrismaBetterSqlite3 {
  private connected: ConnectedAdapter | null = null;

  get adapter(): SqliteAdapter | null {
    return this.connected as unknown as SqliteAdapter | null;
  }

  override async connect(): Promise<ConnectedAdapter> {
    if (this.connected) return this.connected;
    const adapter = await super.connect();
    const dispose = adapter.dispose.bind(adapter);
    adapter.dispose = async () => {
      if (this.connected === adapter) this.connected = null;
      await dispose();
    };
    this.connected = adapter;
    return adapter;
  }
}

/**
 * The SQLite connection, through Prisma's adapter, and Prisma's client on that very connection: the SQLite
 * executor runs on it too (see src/store/sql/sqlite-executor.ts for why). With `withClient`, the generated
 * client's module is loaded now and the client made on the first call of `prisma()`; without, `prisma()` throws.
 * `close` ends whichever is open.
 */
export async function openSqlitePrisma(
  file: string,
  onQuery: ((sql: string) => void) | undefined,
  withClient: boolean,
): Promise<{ prisma: () => PrismaClient; adapter: () => SqliteAdapter; close: () => Promise<void> }> {
  const Client = withClient ? (await import("../__generated__/sqlite/client.ts")).PrismaClient : null;
  const factory = new SharedSqliteConnection({ url: `file:${file}` });
  const connection = (await factory.connect()) as unknown as SqliteAdapter;
  // WAL lets readers run beside the single writer; busy_timeout makes a second process wait for the write
  // lock instead of failing at once; SQLite enforces foreign keys only when asked, per connection.
  connection.client.pragma("journal_mode = WAL");
  connection.client.pragma("busy_timeout = 5000");
  connection.client.pragma("foreign_keys = ON");
  connection.client.pragma("synchronous = NORMAL");
  // Checkpoints (the only fsyncs in WAL mode) run on a thread of their own, not in a request's COMMIT.
  connection.client.pragma("wal_autocheckpoint = 0");
  let prisma: PrismaClient | null = null;
  return {
    prisma: () => {
      if (!Client) throw new Error(NOT_LOADED);
      const log: QueryLog = onQuery ? [{ emit: "event", level: "query" }] : [];
      prisma ??= logQueries(new Client({ adapter: factory, log }), onQuery);
      return prisma;
    },
    adapter: () => {
      if (!factory.adapter) throw new Error("the SQLite connection is not open");
      return factory.adapter;
    },
    close: async () => {
      if (prisma) await prisma.$disconnect();
      await (factory.adapter as unknown as ConnectedAdapter | null)?.dispose();
    },
  };
}

/**
 * The PostgreSQL client, on a small pool of its own (never inside a unit of work: those run on the executor's
 * connections), made on first use like the SQLite one; the pool opens with it. `close` disconnects the client
 * and ends the pool (Prisma leaves a pool it was handed open).
 */
export async function openPostgresPrisma(
  url: string,
  onQuery: ((sql: string) => void) | undefined,
  withClient: boolean,
): Promise<{ prisma: () => PrismaClient; close: () => Promise<void> }> {
  const modules = withClient
    ? await Promise.all([import("../__generated__/postgres/client.ts"), import("@prisma/adapter-pg"), import("pg")])
    : null;
  let prisma: PrismaClient | null = null;
  let pool: Pool | null = null;
  return {
    prisma: () => {
      if (!modules) throw new Error(NOT_LOADED);
      if (prisma) return prisma;
      const [{ PrismaClient: Client }, { PrismaPg }, { default: pg }] = modules;
      pool = new pg.Pool({ connectionString: url, max: PRISMA_POOL_SIZE });
      pool.on("error", () => {});
      pool.on("connect", (connection) => connection.on("error", () => {}));
      const log: QueryLog = onQuery ? [{ emit: "event", level: "query" }] : [];
      prisma = logQueries(new Client({ adapter: new PrismaPg(pool), log }) as unknown as PrismaClient, onQuery);
      return prisma;
    },
    close: async () => {
      if (prisma) await prisma.$disconnect();
      await pool?.end();
    },
  };
}
