import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { buildServices } from "../src/build-services.ts";
import { loadConfig } from "../src/config.ts";
import { openDatabase, type Database } from "../src/store/database.ts";
import { listMigrations, migrateDatabase } from "../src/store/prisma/migration-runner.ts";
import { SqlLiveLogStore } from "../src/store/sql/live-log-store.ts";
import { TEST_WEBHOOK_SECRET_KEY } from "./support/test-server.ts";

/*
 * Migration 0016 on a PostgreSQL database made by migrations 0001–0015 that holds events: the log becomes
 * partitioned by month with every event kept as it was (id, time, live position, writing transaction), its commit
 * rows get the span of their events, and the log reads as before — pages by reference and the live order.
 */

const ADMIN_URL = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
const ORGANIZATION = "0190a000-0000-7000-8000-00000000000a";
const REFERENCES = ["0190a000-0000-7000-8000-0000000000b1", "0190a000-0000-7000-8000-0000000000b2"];
/** Events per reference, over five months: written in three transactions of their own. */
const EVENTS = 3_000;

describe("migrating a PostgreSQL log with events to the partitioned layout", () => {
  const name = `reftrail_test_${randomBytes(6).toString("hex")}`;
  const url = Object.assign(new URL(ADMIN_URL), { pathname: `/${name}` }).toString();
  let client: pg.Client;
  let database: Database | undefined;
  type Row = { id: string; occurred_at: Date; position: string; transaction_id: string };
  let before: Row[];
  let commitsBefore: { position: string; transaction_id: string }[];

  beforeAll(async () => {
    const admin = new pg.Client({ connectionString: ADMIN_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE "${name}"`);
    await admin.end();
    client = new pg.Client({ connectionString: url });
    await client.connect();
    // The earlier migrations, as the runner applies them (one transaction each, recorded in its ledger).
    await client.query(
      `CREATE TABLE "_reftrail_migrations" ("name" TEXT PRIMARY KEY, "checksum" TEXT NOT NULL, "applied_at" TEXT NOT NULL)`,
    );
    for (const migration of listMigrations("postgres").filter((each) => each.name < "0016")) {
      await client.query("BEGIN");
      await client.query(migration.sql);
      await client.query(`INSERT INTO "_reftrail_migrations" VALUES ($1, $2, $3)`, [
        migration.name,
        migration.checksum,
        new Date().toISOString(),
      ]);
      await client.query("COMMIT");
    }
    await client.query(`INSERT INTO "organizations" VALUES ($1, 'migrated', now())`, [ORGANIZATION]);
    for (const [index, reference] of REFERENCES.entries()) {
      await client.query(
        `INSERT INTO "shipping_references" ("id", "organization_id", "booking_number", "carrier_code", "active",
           "auto_unsubscribed", "consecutive_failures", "created_at", "updated_at")
         VALUES ($1, $2, $3, 'MAEU', true, false, 0, now(), now())`,
        [reference, ORGANIZATION, `MIGRATE${index}`],
      );
    }
    // Three transactions, each writing both references' events of its slice of five months.
    for (let slice = 0; slice < 3; slice++) {
      await client.query(
        `INSERT INTO "lifecycle_events" ("id", "organization_id", "reference_id", "type", "occurred_at", "detail",
           "reference_tags")
         SELECT gen_random_uuid()::text, $1, r, 'extraction_succeeded',
           (now() AT TIME ZONE 'UTC') - interval '150 days' + (n * interval '150 days') / $3::int, '{"status":"ok"}', '[]'
         FROM unnest($2::text[]) AS r, generate_series($4::int, $5::int) AS n`,
        [ORGANIZATION, REFERENCES, EVENTS, (slice * EVENTS) / 3 + 1, ((slice + 1) * EVENTS) / 3],
      );
    }
    before = (
      await client.query<Row>(
        `SELECT "id", "occurred_at", "position"::text, "transaction_id"::text FROM "lifecycle_events" ORDER BY "id"`,
      )
    ).rows;
    commitsBefore = (
      await client.query(`SELECT "position"::text, "transaction_id"::text FROM "lifecycle_commits" ORDER BY 1`)
    ).rows;
  }, 120_000);

  afterAll(async () => {
    await database?.close();
    await client?.end();
    const admin = new pg.Client({ connectionString: ADMIN_URL });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin.end();
  });

  it("keeps every event, its live position and its commit, and serves the log as before", async () => {
    expect(before).toHaveLength(2 * EVENTS);
    expect(commitsBefore).toHaveLength(3);
    const result = await migrateDatabase(url);
    // The later migrations too: this one is the first of those pending.
    expect(result.applied[0]).toBe("0016_partitioned_log");

    const after = (
      await client.query<Row>(
        `SELECT "id", "occurred_at", "position"::text, "transaction_id"::text FROM "lifecycle_events" ORDER BY "id"`,
      )
    ).rows;
    expect(after).toEqual(before);
    const { rows: partitioned } = await client.query<{ kind: string }>(
      `SELECT "relkind" AS "kind" FROM pg_class WHERE "oid" = '"lifecycle_events"'::regclass`,
    );
    expect(partitioned[0]!.kind).toBe("p");
    const { rows: months } = await client.query(`SELECT * FROM "lifecycle_events_months"()`);
    expect(months.length).toBeGreaterThanOrEqual(6);
    const { rows: commits } = await client.query<{ position: string; transaction_id: string; exact: boolean }>(
      `SELECT c."position"::text, c."transaction_id"::text,
         (c."first_occurred_at", c."last_occurred_at") = (SELECT MIN(e."occurred_at"), MAX(e."occurred_at")
           FROM "lifecycle_events" e WHERE e."transaction_id" = c."transaction_id") AS "exact"
       FROM "lifecycle_commits" c ORDER BY 1`,
    );
    expect(commits.map(({ position, transaction_id }) => ({ position, transaction_id }))).toEqual(commitsBefore);
    expect(commits.every((commit) => commit.exact)).toBe(true);

    database = await openDatabase(url);
    const services = buildServices(
      loadConfig({ NODE_ENV: "test", DATABASE_URL: url, WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY }),
      database,
    );
    const page = await services.lifecycleLog.listEvents(ORGANIZATION, REFERENCES[0]!, { limit: 100, order: "desc" });
    expect(page.items).toHaveLength(100);
    const times = page.items.map((event) => event.occurredAt.getTime());
    expect(times).toEqual([...times].sort((a, b) => b - a));
    // The live order reads every event once, in (commit, position) order.
    const live = new SqlLiveLogStore(database);
    const read = await live.readSettled({ after: { commit: 0n, sequence: 0n }, limit: 10 * EVENTS });
    expect(read.events).toHaveLength(2 * EVENTS);
    const positions = read.events.map((event) => Number(event.position.sequence));
    expect(positions).toEqual([...positions].sort((a, b) => a - b));
    // A new event after the migration takes the next live position.
    await services.referenceTracking.recordExtraction(ORGANIZATION, REFERENCES[1]!, { status: "succeeded" });
    const next = await live.readSettled({ after: read.reached, limit: 10 });
    expect(next.events.map((event) => event.event.type)).toEqual(["extraction_succeeded"]);
  }, 120_000);
});
