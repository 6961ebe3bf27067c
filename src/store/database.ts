import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { openPostgresPrisma, openSqlitePrisma, type PrismaClient } from "./prisma/clients.ts";
import type { TransactionalExecutor } from "./sql/executor.ts";
import { PostgresExecutor } from "./sql/postgres-executor.ts";
import { SqliteExecutor } from "./sql/sqlite-executor.ts";
import { startSqliteCheckpointer } from "./sqlite-checkpointer.ts";

export type DatabaseProvider = "sqlite" | "postgres";
export type { PrismaClient, PrismaTransaction } from "./prisma/clients.ts";

/** One database, opened: the executor the store's statements run on, and Prisma's client of record. */
export interface Database {
  readonly provider: DatabaseProvider;
  readonly url: string;
  /** Prisma's model API, for administration (src/store/prisma/clients.ts). */
  readonly prisma: PrismaClient;
  /** The store's statements, and its units of work (src/store/sql/executor.ts). */
  readonly sql: TransactionalExecutor;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** Called with every SQL statement sent, by the executor or by Prisma; tests count statements through it. */
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

export async function openDatabase(url: string, options: OpenDatabaseOptions = {}): Promise<Database> {
  const provider = providerOf(url);
  if (provider === "sqlite") {
    const file = sqliteFilePath(url);
    mkdirSync(dirname(file), { recursive: true });
    const { prisma, adapter } = await openSqlitePrisma(file, options.onQuery);
    const checkpointer = startSqliteCheckpointer(file);
    const sql = new SqliteExecutor(adapter, file, options.onQuery);
    return {
      provider,
      url,
      prisma,
      sql,
      close: async () => {
        await prisma.$disconnect();
        await sql.close();
        await checkpointer.stop();
      },
    };
  }
  const { prisma, close: closePrisma } = openPostgresPrisma(url, options.onQuery);
  const sql = new PostgresExecutor(url, options.onQuery);
  return {
    provider,
    url,
    prisma,
    sql,
    close: async () => {
      await closePrisma();
      await sql.close();
    },
  };
}
