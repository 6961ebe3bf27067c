/*
 * Bulk seeding for the benchmark: raw SQL in big multi-row INSERT batches inside transactions, bypassing the
 * services (which would take minutes for 100k references or 1M events). Rows are written in exactly the
 * representation Prisma writes, so the application reads them as if it had written them itself:
 *
 *   - ids: UUIDv7 strings whose timestamp is the row's creation time (`v7({ msecs })`), so id order is time order;
 *   - SQLite (better-sqlite3 adapter): DateTime is TEXT `2026-11-22T03:42:45.190+00:00`, Boolean is INTEGER 0/1,
 *     Json is TEXT (JSON.stringify);
 *   - PostgreSQL: DateTime is `timestamp(3)` without time zone holding the UTC wall clock, Json is `jsonb`.
 *
 * `checkSeededFormat` (run.ts) compares a seeded row with one the application wrote through its services, so a
 * change in Prisma's storage format fails the benchmark instead of silently skewing it.
 */
import Sqlite from "better-sqlite3";
import pg from "pg";
import { v7 } from "uuid";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { LIFECYCLE_EVENT_TYPES } from "../src/domain/lifecycle/lifecycle-event.ts";
import { tagNameKey } from "../src/domain/tags/tag-name.ts";
import { readFileSync } from "node:fs";
import { sqliteFilePath } from "../src/store/database.ts";

export type Kind = "sqlite" | "postgres";

/**
 * The statement of migration 0009 that fills every reference's `tag_list` from its links: seeded rows are
 * written past the store, so their lists are built the way the migration builds existing ones.
 */
export function tagListBackfill(kind: Kind): string {
  const migration = readFileSync(
    new URL(`../prisma/migrations/${kind}/0009_reference_tag_lists/migration.sql`, import.meta.url),
    "utf8",
  );
  const update = migration.split(";").find((statement) => /^\s*UPDATE\b/m.test(statement.replace(/^\s*--.*$/gm, "")));
  if (!update) throw new Error("migration 0009 has no UPDATE statement");
  return update.replace(/^\s*--.*$/gm, "");
}

const debug = (message: string) => {
  if (process.env.BENCH_DEBUG) console.error(`[seed] ${message}`);
};

/** A small deterministic PRNG (mulberry32), so every run seeds the same tag distribution. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A value for one DateTime column, in the representation Prisma uses on `kind`. */
export function dbTime(kind: Kind, ms: number): string {
  const iso = new Date(ms).toISOString();
  // PostgreSQL ignores the zone of a literal cast to `timestamp without time zone`, keeping the UTC wall clock.
  return kind === "sqlite" ? iso.replace("Z", "+00:00") : iso;
}

const dbBool = (kind: Kind, value: boolean): boolean | number => (kind === "sqlite" ? (value ? 1 : 0) : value);

/** Valid ISO 6346 container number for a serial. */
export function containerNumber(owner: string, serial: number): string {
  const firstTen = `${owner}U${String(serial % 1_000_000).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

const CARRIERS = ["MAEU", "MSCU", "CMDU", "HLCU", "ONEY", "EGLV", "COSU", "ZIMU"];
const OWNERS = ["BEN", "CAI", "TGH", "MSK", "TRL", "SEG"];

/** Inserts rows (arrays of column values) into `table`, over a writer bound to one database. */
export interface BulkWriter {
  insert(table: string, columns: readonly string[], rows: readonly unknown[][]): Promise<void>;
  begin(): Promise<void>;
  commit(): Promise<void>;
  /**
   * Drops the non-unique secondary indexes of `tables` and returns the statements that recreate them: building
   * an index once over sorted data is several times faster than maintaining it row by row.
   */
  dropSecondaryIndexes(tables: readonly string[]): Promise<string[]>;
  /**
   * PostgreSQL numbers the events of a transaction at COMMIT by a deferred trigger (migration 0006), and refuses
   * to build an index on a table with such work pending: run it now, before the indexes are rebuilt.
   */
  runDeferredTriggers(): Promise<void>;
  exec(sql: string, params?: unknown[]): Promise<void>;
  /** SQLite: checkpoint the WAL; PostgreSQL: VACUUM (ANALYZE) the seeded tables. */
  finish(tables: readonly string[]): Promise<void>;
  close(): Promise<void>;
}

const SQLITE_CHUNK = 250;

class SqliteWriter implements BulkWriter {
  private readonly db: Sqlite.Database;
  private readonly statements = new Map<string, Sqlite.Statement>();

  constructor(
    url: string,
    private readonly analyze: boolean,
  ) {
    this.db = new Sqlite(sqliteFilePath(url), { timeout: 10_000 });
    // The seeding connection is the only one open (see run.ts): writing straight to the database file, with no
    // rollback journal, halves the load time. close() puts the database back in WAL mode as the application
    // expects (its own connection sets WAL too).
    this.db.pragma("journal_mode = OFF");
    // Per connection: only this seeding connection skips fsyncs; the application's keeps its own settings.
    this.db.pragma("synchronous = OFF");
    this.db.pragma("cache_size = -262144");
  }

  async insert(table: string, columns: readonly string[], rows: readonly unknown[][]): Promise<void> {
    // Fixed-size chunks so that a handful of prepared statements serve every batch.
    for (let start = 0; start < rows.length; start += SQLITE_CHUNK) {
      this.insertChunk(table, columns, rows.slice(start, start + SQLITE_CHUNK));
    }
  }

  private insertChunk(table: string, columns: readonly string[], rows: readonly unknown[][]): void {
    const key = `${table}|${rows.length}`;
    let statement = this.statements.get(key);
    if (!statement) {
      const tuple = `(${columns.map(() => "?").join(",")})`;
      statement = this.db.prepare(
        `INSERT INTO "${table}" (${columns.map((c) => `"${c}"`).join(",")}) VALUES ${Array(rows.length).fill(tuple).join(",")}`,
      );
      this.statements.set(key, statement);
    }
    statement.run(rows.flat());
  }

  async dropSecondaryIndexes(tables: readonly string[]): Promise<string[]> {
    const recreate: string[] = [];
    for (const table of tables) {
      const indexes = this.db
        .prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL`)
        .all(table) as { name: string; sql: string }[];
      for (const index of indexes) {
        if (/^\s*CREATE\s+UNIQUE/i.test(index.sql)) continue;
        this.db.exec(`DROP INDEX "${index.name}"`);
        recreate.push(index.sql);
      }
    }
    return recreate;
  }

  async exec(sql: string): Promise<void> {
    this.db.exec(sql);
  }

  async runDeferredTriggers(): Promise<void> {}

  async begin(): Promise<void> {
    this.db.exec("BEGIN");
  }

  async commit(): Promise<void> {
    this.db.exec("COMMIT");
  }

  async finish(): Promise<void> {
    // The application does not run ANALYZE on SQLite, so by default neither does the benchmark.
    if (this.analyze) this.db.exec("ANALYZE");
    this.db.pragma("wal_checkpoint(TRUNCATE)");
  }

  async close(): Promise<void> {
    this.db.pragma("journal_mode = WAL");
    this.db.close();
  }
}

class PostgresWriter implements BulkWriter {
  private constructor(private readonly client: pg.Client) {}

  static async open(url: string): Promise<PostgresWriter> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query("SET synchronous_commit = off");
    await client.query("SET maintenance_work_mem = '256MB'");
    return new PostgresWriter(client);
  }

  async insert(table: string, columns: readonly string[], rows: readonly unknown[][]): Promise<void> {
    if (rows.length === 0) return;
    const params: unknown[] = [];
    const tuples: string[] = [];
    for (const row of rows) {
      const start = params.length;
      params.push(...row);
      tuples.push(`(${row.map((_, i) => `$${start + i + 1}`).join(",")})`);
    }
    await this.client.query(
      `INSERT INTO "${table}" (${columns.map((c) => `"${c}"`).join(",")}) VALUES ${tuples.join(",")}`,
      params,
    );
  }

  async dropSecondaryIndexes(tables: readonly string[]): Promise<string[]> {
    const { rows } = await this.client.query<{ name: string; definition: string }>(
      `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition
         FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
        WHERE t.relname = ANY($1) AND NOT i.indisunique AND NOT i.indisprimary`,
      [tables],
    );
    for (const row of rows) await this.client.query(`DROP INDEX "${row.name}"`);
    // A partitioned table's index reads back as `ON ONLY` (the parent's index alone, invalid until each partition
    // has its own): rebuilt that way, the partitions would be left with no index. `ON` builds every partition's.
    return rows.map((row) => row.definition.replace(" ON ONLY ", " ON "));
  }

  async runDeferredTriggers(): Promise<void> {
    await this.client.query("SET CONSTRAINTS ALL IMMEDIATE");
  }

  async exec(sql: string, params?: unknown[]): Promise<void> {
    await this.client.query(sql, params);
  }

  async begin(): Promise<void> {
    await this.client.query("BEGIN");
  }

  async commit(): Promise<void> {
    await this.client.query("COMMIT");
  }

  async finish(tables: readonly string[]): Promise<void> {
    // What autovacuum would do on a live database (statistics, visibility map), done now so that it does not
    // kick in half-way through a measurement.
    await this.client.query(`VACUUM (ANALYZE) ${tables.map((t) => `"${t}"`).join(", ")}`);
  }

  async close(): Promise<void> {
    await this.client.end();
  }
}

export async function openWriter(kind: Kind, url: string, sqliteAnalyze: boolean): Promise<BulkWriter> {
  return kind === "sqlite" ? new SqliteWriter(url, sqliteAnalyze) : PostgresWriter.open(url);
}

export interface SeedReferencesOptions {
  readonly kind: Kind;
  readonly url: string;
  readonly organizationId: string;
  readonly tags: number;
  readonly references: number;
  /** Also write one `reference_created` lifecycle event per reference. */
  readonly createdEvents: boolean;
  readonly sqliteAnalyze: boolean;
  /** Creation time of the newest reference (ms); the others are spread over the 30 days before it. */
  readonly newestAt: number;
}

export interface SeededReferences {
  readonly tagNames: readonly string[];
  /** How many references carry each tag, by tag name. */
  readonly referencesPerTag: ReadonlyMap<string, number>;
  readonly referenceTagRows: number;
  readonly eventRows: number;
  readonly seconds: number;
}

export const REFERENCE_COLUMNS = [
  "id",
  "organization_id",
  "container_id",
  "bill_of_lading",
  "booking_number",
  "carrier_code",
  "parent_reference_id",
  "active",
  "deactivate_reason",
  "auto_unsubscribed",
  "last_update_status",
  "consecutive_failures",
  "estimated_departure",
  "estimated_arrival",
  "created_at",
  "updated_at",
] as const;
export const EVENT_COLUMNS = [
  "id",
  "organization_id",
  "reference_id",
  "type",
  "occurred_at",
  "detail",
  "reference_tags",
] as const;

export interface ReferenceSeed {
  readonly id: string;
  readonly containerId: string;
  readonly carrierCode: string;
  readonly createdAtMs: number;
}

export function referenceRow(kind: Kind, organizationId: string, ref: ReferenceSeed): unknown[] {
  const at = dbTime(kind, ref.createdAtMs);
  return [
    ref.id,
    organizationId,
    ref.containerId,
    null,
    null,
    ref.carrierCode,
    null,
    dbBool(kind, true),
    null,
    dbBool(kind, false),
    null,
    0,
    null,
    null,
    at,
    at,
  ];
}

/** 1 organization's tags (`tag-0000`…), references (0–3 random tags each) and optionally their creation events. */
export async function seedReferences(options: SeedReferencesOptions): Promise<SeededReferences> {
  const started = performance.now();
  const { kind, organizationId } = options;
  const random = prng(20261122);
  const writer = await openWriter(kind, options.url, options.sqliteAnalyze);
  const batch = kind === "sqlite" ? 500 : 1_000;
  const tagNames: string[] = [];
  const tagIds: string[] = [];
  const referencesPerTag = new Map<string, number>();
  let referenceTagRows = 0;
  let eventRows = 0;
  try {
    await writer.begin();
    const recreate = await writer.dropSecondaryIndexes(["shipping_references", "reference_tags", "lifecycle_events"]);
    const spanMs = 30 * 86_400_000;
    const firstAt = options.newestAt - spanMs;
    // Tags: created before every reference.
    let rows: unknown[][] = [];
    for (let i = 0; i < options.tags; i++) {
      const name = `tag-${String(i).padStart(4, "0")}`;
      const at = firstAt - (options.tags - i) * 1_000;
      const id = v7({ msecs: at });
      tagNames.push(name);
      tagIds.push(id);
      referencesPerTag.set(name, 0);
      rows.push([id, organizationId, name, tagNameKey(name), dbTime(kind, at), dbTime(kind, at)]);
      if (rows.length === batch) {
        await writer.insert("tags", ["id", "organization_id", "name", "name_key", "created_at", "updated_at"], rows);
        rows = [];
      }
    }
    await writer.insert("tags", ["id", "organization_id", "name", "name_key", "created_at", "updated_at"], rows);

    let refRows: unknown[][] = [];
    let linkRows: unknown[][] = [];
    let eventBatch: unknown[][] = [];
    const step = options.references > 1 ? spanMs / (options.references - 1) : 0;
    for (let i = 0; i < options.references; i++) {
      const createdAtMs = Math.round(firstAt + i * step);
      const ref: ReferenceSeed = {
        id: v7({ msecs: createdAtMs }),
        containerId: containerNumber(OWNERS[i % OWNERS.length]!, i),
        carrierCode: CARRIERS[Math.floor(random() * CARRIERS.length)]!,
        createdAtMs,
      };
      refRows.push(referenceRow(kind, organizationId, ref));
      const count = Math.floor(random() * 4);
      const chosen = new Set<number>();
      while (chosen.size < count) chosen.add(Math.floor(random() * options.tags));
      const snapshot: { id: string; name: string }[] = [];
      for (const t of chosen) {
        linkRows.push([ref.id, tagIds[t]!, dbTime(kind, createdAtMs)]);
        referencesPerTag.set(tagNames[t]!, referencesPerTag.get(tagNames[t]!)! + 1);
        snapshot.push({ id: tagIds[t]!, name: tagNames[t]! });
      }
      if (options.createdEvents) {
        const detail = {
          reference_id: ref.id,
          organization_id: organizationId,
          identifier_type: "container",
          identifier_value: ref.containerId,
          carrier_scac: ref.carrierCode,
          parent_reference_id: null,
        };
        snapshot.sort((a, b) => a.name.localeCompare(b.name));
        eventBatch.push([
          v7({ msecs: createdAtMs }),
          organizationId,
          ref.id,
          "reference_created",
          dbTime(kind, createdAtMs),
          JSON.stringify(detail),
          JSON.stringify(snapshot),
        ]);
      }
      if (refRows.length === batch) {
        // References first: reference_tags has a foreign key to them.
        await writer.insert("shipping_references", REFERENCE_COLUMNS, refRows);
        await writer.insert("reference_tags", ["reference_id", "tag_id", "created_at"], linkRows);
        await writer.insert("lifecycle_events", EVENT_COLUMNS, eventBatch);
        referenceTagRows += linkRows.length;
        eventRows += eventBatch.length;
        refRows = [];
        linkRows = [];
        eventBatch = [];
      }
    }
    await writer.insert("shipping_references", REFERENCE_COLUMNS, refRows);
    await writer.insert("reference_tags", ["reference_id", "tag_id", "created_at"], linkRows);
    referenceTagRows += linkRows.length;
    await writer.insert("lifecycle_events", EVENT_COLUMNS, eventBatch);
    eventRows += eventBatch.length;
    await writer.exec(tagListBackfill(kind));
    await writer.runDeferredTriggers();
    for (const sql of recreate) await writer.exec(sql);
    await writer.commit();
    await writer.finish(["tags", "shipping_references", "reference_tags", "lifecycle_events"]);
  } finally {
    await writer.close();
  }
  return { tagNames, referencesPerTag, referenceTagRows, eventRows, seconds: (performance.now() - started) / 1_000 };
}

export interface SeedEventLogOptions {
  readonly kind: Kind;
  readonly url: string;
  readonly organizationId: string;
  readonly events: number;
  readonly sqliteAnalyze: boolean;
  /** occurred_at of the first event (ms); event i happens `i` ms later. */
  readonly firstAt: number;
  /** Tags snapshotted on every event (the log reference carries them). */
  readonly tags: readonly { id: string; name: string }[];
}

export interface SeededEventLog {
  readonly referenceId: string;
  /** occurred_at of event i, as an ISO string. */
  occurredAt(i: number): string;
  readonly seconds: number;
}

/** Details per type, the shapes of SPEC §7 (every one with reference_id and organization_id). */
export function eventDetails(referenceId: string, organizationId: string, containerId: string): Map<string, string> {
  const base = { reference_id: referenceId, organization_id: organizationId };
  const details: Record<string, object> = {
    reference_created: {
      ...base,
      identifier_type: "container",
      identifier_value: containerId,
      carrier_scac: "MAEU",
      parent_reference_id: null,
    },
    reference_deactivated: { ...base, deactivate_reason: "carrier_not_found", auto_unsubscribed: false },
    reference_reactivated: base,
    reference_update_created: {
      ...base,
      reference_update_id: v7(),
      update: { status: "in_transit", vessel: "BENCH STAR" },
    },
    extraction_succeeded: { ...base, status: "succeeded" },
    extraction_failed: {
      ...base,
      status: "failed",
      error: { code: "TIMEOUT", message: "carrier site timed out" },
      consecutive_failures: 1,
    },
    estimated_departure_changed: { ...base, previous: null, current: "2026-12-01T08:00:00.000Z" },
    estimated_arrival_changed: { ...base, previous: "2026-12-20T08:00:00.000Z", current: "2026-12-21T08:00:00.000Z" },
  };
  return new Map(LIFECYCLE_EVENT_TYPES.map((type) => [type, JSON.stringify(details[type])]));
}

/** One reference with `events` lifecycle events, 1 ms apart, types cycling through every valid type. */
export async function seedEventLog(options: SeedEventLogOptions): Promise<SeededEventLog> {
  const started = performance.now();
  const { kind, organizationId, firstAt } = options;
  const createdAt = firstAt - 1;
  const referenceId = v7({ msecs: createdAt });
  const containerId = containerNumber("LOG", 424242);
  const details = eventDetails(referenceId, organizationId, containerId);
  const snapshot = JSON.stringify(options.tags);
  const writer = await openWriter(kind, options.url, options.sqliteAnalyze);
  try {
    await writer.begin();
    const recreate = await writer.dropSecondaryIndexes(["lifecycle_events"]);
    await writer.insert("shipping_references", REFERENCE_COLUMNS, [
      referenceRow(kind, organizationId, { id: referenceId, containerId, carrierCode: "MAEU", createdAtMs: createdAt }),
    ]);
    await writer.insert(
      "reference_tags",
      ["reference_id", "tag_id", "created_at"],
      options.tags.map((tag) => [referenceId, tag.id, dbTime(kind, createdAt)]),
    );
    const types = LIFECYCLE_EVENT_TYPES;
    if (writer instanceof PostgresWriter) {
      // Only the ids travel per row; the server derives occurred_at (first + n ms) and picks the type's detail
      // from an 8-element array, which keeps the bulk load bound by PostgreSQL's own write speed.
      const batch = 20_000;
      const detailArray = types.map((type) => details.get(type)!);
      for (let start = 0; start < options.events; start += batch) {
        const end = Math.min(options.events, start + batch);
        const ids: string[] = [];
        const typeIndexes: number[] = [];
        for (let i = start; i < end; i++) {
          ids.push(v7({ msecs: firstAt + i }));
          typeIndexes.push((i % types.length) + 1);
        }
        await writer.exec(
          `INSERT INTO "lifecycle_events" ("id", "organization_id", "reference_id", "type", "occurred_at", "detail", "reference_tags")
           SELECT u.id, $3, $4, ($5::text[])[u.t], $6::timestamp(3) + (u.n - 1) * interval '1 millisecond', ($7::jsonb[])[u.t], $8::jsonb
             FROM unnest($1::text[], $2::int[]) WITH ORDINALITY AS u(id, t, n)`,
          [
            ids,
            typeIndexes,
            organizationId,
            referenceId,
            [...types],
            dbTime(kind, firstAt + start),
            detailArray,
            snapshot,
          ],
        );
      }
    } else {
      const batch = 1_000;
      let rows: unknown[][] = [];
      for (let i = 0; i < options.events; i++) {
        const type = types[i % types.length]!;
        rows.push([
          v7({ msecs: firstAt + i }),
          organizationId,
          referenceId,
          type,
          dbTime(kind, firstAt + i),
          details.get(type)!,
          snapshot,
        ]);
        if (rows.length === batch) {
          await writer.insert("lifecycle_events", EVENT_COLUMNS, rows);
          rows = [];
        }
      }
      await writer.insert("lifecycle_events", EVENT_COLUMNS, rows);
    }
    debug(`events inserted ${((performance.now() - started) / 1000).toFixed(1)}s`);
    if (options.tags.length > 0) await writer.exec(tagListBackfill(kind));
    await writer.runDeferredTriggers();
    for (const sql of recreate) await writer.exec(sql);
    debug(`indexes rebuilt ${((performance.now() - started) / 1000).toFixed(1)}s`);
    await writer.commit();
    debug(`committed ${((performance.now() - started) / 1000).toFixed(1)}s`);
    await writer.finish(["shipping_references", "reference_tags", "lifecycle_events"]);
    debug(`finished ${((performance.now() - started) / 1000).toFixed(1)}s`);
  } finally {
    await writer.close();
  }
  return {
    referenceId,
    occurredAt: (i) => new Date(firstAt + i).toISOString(),
    seconds: (performance.now() - started) / 1_000,
  };
}
