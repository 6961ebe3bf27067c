import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import Sqlite from "better-sqlite3";
import { providerOf, sqliteFilePath, type Database, type DatabaseProvider } from "../database.ts";
import { Prisma } from "../sql/sql-template.ts";

/*
 * Applies the SQL files under prisma/migrations/<provider>/ in name order, one transaction per file, recording
 * each in `_reftrail_migrations`. Prisma's own `migrate deploy` cannot run on PostgreSQL with the JavaScript
 * engine (see docs/decisions.md), so this small runner does it for both databases. On PostgreSQL a session
 * advisory lock serializes instances that start together: the second waits, then finds nothing left to do.
 * Every start and every command runs it, and almost always nothing is pending: so it first reads the ledger in
 * one plain read, and takes locks and write transactions only when a migration is missing from it.
 */

const MIGRATIONS_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..", "prisma", "migrations");
const ADVISORY_LOCK_KEY = 727_001_1; // arbitrary, constant: "reftrail migrations"

export interface Migration {
  readonly name: string;
  readonly sql: string;
  readonly checksum: string;
}

export interface MigrationResult {
  readonly applied: readonly string[];
  readonly alreadyApplied: number;
}

export function listMigrations(provider: DatabaseProvider): Migration[] {
  const folder = join(MIGRATIONS_ROOT, provider);
  return readdirSync(folder, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort()
    .map((name) => {
      const sql = readFileSync(join(folder, name, "migration.sql"), "utf8");
      return { name, sql, checksum: createHash("sha256").update(sql).digest("hex") };
    });
}

/**
 * The names of `migrations` (this build's, by default) that `database` has not applied yet, in order
 * (readiness). Throws when the database does not answer.
 */
export async function findPendingMigrations(
  database: Database,
  migrations: readonly Migration[] = listMigrations(database.provider),
): Promise<string[]> {
  const rows = await database.sql.all<{ name: string }>(Prisma.sql`SELECT "name" FROM "_reftrail_migrations"`);
  const applied = new Set(rows.map((row) => row.name));
  return migrations.map((migration) => migration.name).filter((name) => !applied.has(name));
}

const CREATE_LEDGER = `CREATE TABLE IF NOT EXISTS "_reftrail_migrations" (
  "name" TEXT PRIMARY KEY,
  "checksum" TEXT NOT NULL,
  "applied_at" TEXT NOT NULL
)`;

export async function migrateDatabase(url: string): Promise<MigrationResult> {
  const provider = providerOf(url);
  const migrations = listMigrations(provider);
  return provider === "sqlite" ? migrateSqlite(url, migrations) : migratePostgres(url, migrations);
}

function migrateSqlite(url: string, migrations: Migration[]): MigrationResult {
  const file = sqliteFilePath(url);
  mkdirSync(dirname(file), { recursive: true });
  const db = new Sqlite(file, { timeout: 10_000 });
  try {
    const recorded = recordedSqliteMigrations(db);
    if (recorded && migrations.every((migration) => recorded.has(migration.name)))
      return { applied: [], alreadyApplied: migrations.length };
    db.pragma("journal_mode = WAL");
    db.exec(CREATE_LEDGER);
    const applied: string[] = [];
    let alreadyApplied = 0;
    for (const migration of migrations) {
      // IMMEDIATE takes the write lock before reading the ledger, so two processes cannot both apply a file.
      const apply = db.transaction(() => {
        const row = db.prepare(`SELECT checksum FROM "_reftrail_migrations" WHERE name = ?`).get(migration.name) as
          { checksum: string } | undefined;
        if (row) return false;
        db.exec(migration.sql);
        db.prepare(`INSERT INTO "_reftrail_migrations" (name, checksum, applied_at) VALUES (?, ?, ?)`).run(
          migration.name,
          migration.checksum,
          new Date().toISOString(),
        );
        return true;
      });
      if (apply.immediate()) applied.push(migration.name);
      else alreadyApplied += 1;
    }
    return { applied, alreadyApplied };
  } finally {
    db.close();
  }
}

/** The names in the ledger, or null when there is no ledger yet (a new database). */
function recordedSqliteMigrations(db: Sqlite.Database): Set<string> | null {
  const ledger = db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '_reftrail_migrations'`);
  if (!ledger.get()) return null;
  const rows = db.prepare(`SELECT name FROM "_reftrail_migrations"`).all() as { name: string }[];
  return new Set(rows.map((row) => row.name));
}

async function migratePostgres(url: string, migrations: Migration[]): Promise<MigrationResult> {
  // Loaded here, not at the top: a process on SQLite never needs the PostgreSQL driver.
  const { default: pg } = await import("pg");
  const client = new pg.Client({ connectionString: url });
  // A connection the server ends emits "error", which with no listener ends the process with a stack trace; the
  // statement in flight rejects on its own, and that rejection is the error the caller reports.
  client.on("error", () => {});
  await client.connect();
  try {
    const [ledger] = (
      await client.query<{ present: boolean }>(`SELECT to_regclass('"_reftrail_migrations"') IS NOT NULL AS present`)
    ).rows;
    if (ledger?.present) {
      const { rows } = await client.query<{ name: string }>(`SELECT name FROM "_reftrail_migrations"`);
      const recorded = new Set(rows.map((row) => row.name));
      if (migrations.every((migration) => recorded.has(migration.name)))
        return { applied: [], alreadyApplied: migrations.length };
    }
    await client.query("SELECT pg_advisory_lock($1)", [ADVISORY_LOCK_KEY]);
    await client.query(CREATE_LEDGER);
    const { rows } = await client.query<{ name: string }>(`SELECT name FROM "_reftrail_migrations"`);
    const done = new Set(rows.map((row) => row.name));
    const applied: string[] = [];
    for (const migration of migrations) {
      if (done.has(migration.name)) continue;
      await client.query("BEGIN");
      try {
        await client.query(migration.sql);
        await client.query(`INSERT INTO "_reftrail_migrations" (name, checksum, applied_at) VALUES ($1, $2, $3)`, [
          migration.name,
          migration.checksum,
          new Date().toISOString(),
        ]);
        await client.query("COMMIT");
      } catch (error) {
        await client.query("ROLLBACK");
        throw new Error(`migration ${migration.name} failed: ${(error as Error).message}`, { cause: error });
      }
      applied.push(migration.name);
    }
    return { applied, alreadyApplied: done.size };
  } finally {
    await client.query("SELECT pg_advisory_unlock($1)", [ADVISORY_LOCK_KEY]).catch(() => undefined);
    await client.end();
  }
}
