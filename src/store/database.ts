import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { openPostgresPrisma, openSqlitePrisma, type PrismaClient } from "./prisma/clients.ts";
import type { TransactionalExecutor } from "./sql/executor.ts";

export type DatabaseProvider = "sqlite" | "postgres";
export type { PrismaClient, PrismaTransaction } from "./prisma/clients.ts";

/** One database, opened: the executor the store's statements run on, and Prisma's client of record. */
export interface Database {
  readonly provider: DatabaseProvider;
  readonly url: string;
  /**
   * Prisma's model API, for tests (src/store/prisma/clients.ts): made on first use; throws when
   * the database was opened with `prismaClient: false`.
   */
  readonly prisma: PrismaClient;
  /** The store's statements, and its units of work (src/store/sql/executor.ts). */
  readonly sql: TransactionalExecutor;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** Called with every SQL statement sent, by the executor or by Prisma; tests count statements through it. */
  readonly onQuery?: (sql: string) => void;
  /**
   * Whether `database.prisma` may be used (default true). The server and the `reftrail` command pass false: they
   * run every statement on the executor, and so never load Prisma's runtime and query compiler.
   */
  readonly prismaClient?: boolean;
  /**
   * SQLite: whether pages read outside units of work run on a thread of their own (default true; see
   * src/store/sql/sqlite-read-thread.ts). The `reftrail` command passes false: its few reads are not worth a thread.
   */
  readonly sqliteReadThread?: boolean;
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

/**
 * Opens `url`. Each provider's driver loads only when that provider is opened (pg alone costs a command tens of
 * milliseconds).
 */
export async function openDatabase(url: string, options: OpenDatabaseOptions = {}): Promise<Database> {
  const provider = providerOf(url);
  if (provider === "sqlite") {
    const file = sqliteFilePath(url);
    mkdirSync(dirname(file), { recursive: true });
    const [{ SqliteExecutor }, { startSqliteCheckpointer }] = await Promise.all([
      import("./sql/sqlite-executor.ts"),
      import("./sqlite-checkpointer.ts"),
    ]);
    const {
      prisma,
      adapter,
      close: closePrisma,
    } = await openSqlitePrisma(file, options.onQuery, options.prismaClient ?? true);
    const checkpointer = startSqliteCheckpointer(file);
    const sql = new SqliteExecutor(adapter, file, options.onQuery, options.sqliteReadThread ?? true);
    return {
      provider,
      url,
      get prisma() {
        return prisma();
      },
      sql,
      close: async () => {
        await closePrisma();
        await sql.close();
        await checkpointer.stop();
      },
    };
  }
  const { prisma, close: closePrisma } = await openPostgresPrisma(url, options.onQuery, options.prismaClient ?? true);
  const { PostgresExecutor } = await import("./sql/postgres-executor.ts");
  const sql = new PostgresExecutor(url, options.onQuery);
  return {
    provider,
    url,
    get prisma() {
      return prisma();
    },
    sql,
    close: async () => {
      await closePrisma();
      await sql.close();
    },
  };
}
