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

/** Prisma's better-sqlite3 adapter factory, keeping the adapter (and so the connection) it creates. */
class SharedSqliteConnection extends PrismaBetterSqlite3 {
  adapter: SqliteAdapter | null = null;

  override async connect(): ReturnType<PrismaBetterSqlite3["connect"]> {
    const adapter = await super.connect();
    this.adapter = adapter as unknown as SqliteAdapter;
    return adapter;
  }
}

/**
 * The SQLite client and the adapter it connects through: the SQLite executor runs on that very connection
 * (see src/store/sql/sqlite-executor.ts for why).
 */
export async function openSqlitePrisma(
  file: string,
  onQuery?: (sql: string) => void,
): Promise<{ prisma: PrismaClient; adapter: () => SqliteAdapter }> {
  const factory = new SharedSqliteConnection({ url: `file:${file}` });
  const log: QueryLog = onQuery ? [{ emit: "event", level: "query" }] : [];
  const prisma = logQueries(new SqlitePrismaClient({ adapter: factory, log }), onQuery);
  // WAL lets readers run beside the single writer; busy_timeout makes a second process wait for the write
  // lock instead of failing at once; SQLite enforces foreign keys only when asked, per connection.
  await prisma.$queryRawUnsafe("PRAGMA journal_mode = WAL");
  await prisma.$queryRawUnsafe("PRAGMA busy_timeout = 5000");
  await prisma.$queryRawUnsafe("PRAGMA foreign_keys = ON");
  await prisma.$queryRawUnsafe("PRAGMA synchronous = NORMAL");
  // Checkpoints (the only fsyncs in WAL mode) run on a thread of their own, not in a request's COMMIT.
  await prisma.$queryRawUnsafe("PRAGMA wal_autocheckpoint = 0");
  return {
    prisma,
    adapter: () => {
      if (!factory.adapter) throw new Error("the SQLite connection is not open");
      return factory.adapter;
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
): { prisma: PrismaClient; close: () => Promise<void> } {
  const pool = new pg.Pool({ connectionString: url, max: PRISMA_POOL_SIZE });
  pool.on("error", () => {});
  pool.on("connect", (connection) => connection.on("error", () => {}));
  const log: QueryLog = onQuery ? [{ emit: "event", level: "query" }] : [];
  const client = new PostgresPrismaClient({ adapter: new PrismaPg(pool), log });
  const prisma = logQueries(client as unknown as PrismaClient, onQuery);
  return {
    prisma,
    close: async () => {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}
