import { PrismaBetterSqlite3 } from "@prisma/adapter-better-sqlite3";
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { PrismaClient as SqlitePrismaClient } from "../__generated__/sqlite/client.ts";
import { PrismaClient as PostgresPrismaClient } from "../__generated__/postgres/client.ts";
import type { SqliteAdapter } from "../sql/sqlite-executor.ts";

/*
 * The schema-driven clients of record, generated from prisma/sqlite/schema.prisma and its PostgreSQL copy. Prisma serves
 * what is neither hot nor inside a unit of work (administration, listings an operator asks for); the hot paths
 * and every unit of work run as SQL on the executors (src/store/sql/).
 */

/**
 * The two generated clients have the same models and the same query API; the store is typed against the
 * SQLite one and only uses features both providers support (no `mode: "insensitive"`, no `skipDuplicates`).
 */
export type PrismaClient = SqlitePrismaClient;
export type PrismaTransaction = Parameters<Parameters<PrismaClient["$transaction"]>[0]>[0];

/** Connections Prisma's own PostgreSQL pool may open: it serves administration only. */
const PRISMA_POOL_SIZE = 4;

type QueryLog = { emit: "event"; level: "query" }[];

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
 * executor runs on it too (see src/store/sql/sqlite-executor.ts for why). The client is made on first use of
 * `prisma()`: loading Prisma's query compiler (WebAssembly) costs more CPU than the rest of a start, and the
 * store's statements, a command's and a start's included, do not need it. `close` ends whichever is open.
 */
export async function openSqlitePrisma(
  file: string,
  onQuery?: (sql: string) => void,
): Promise<{ prisma: () => PrismaClient; adapter: () => SqliteAdapter; close: () => Promise<void> }> {
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
      const log: QueryLog = onQuery ? [{ emit: "event", level: "query" }] : [];
      prisma ??= logQueries(new SqlitePrismaClient({ adapter: factory, log }), onQuery);
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
 * connections). `close` disconnects the client and ends the pool (Prisma leaves a pool it was handed open).
 */
export function openPostgresPrisma(
  url: string,
  onQuery?: (sql: string) => void,
): { prisma: () => PrismaClient; close: () => Promise<void> } {
  const pool = new pg.Pool({ connectionString: url, max: PRISMA_POOL_SIZE });
  pool.on("error", () => {});
  pool.on("connect", (connection) => connection.on("error", () => {}));
  // Made on first use, like the SQLite one (see openSqlitePrisma).
  let prisma: PrismaClient | null = null;
  return {
    prisma: () => {
      const log: QueryLog = onQuery ? [{ emit: "event", level: "query" }] : [];
      prisma ??= logQueries(
        new PostgresPrismaClient({ adapter: new PrismaPg(pool), log }) as unknown as PrismaClient,
        onQuery,
      );
      return prisma;
    },
    close: async () => {
      if (prisma) await prisma.$disconnect();
      await pool.end();
    },
  };
}
