/*
 * Which step of a prune slows a writer (issue 36; docs/scaling.md). Seeds a 20-month log of PROBE_EVENTS events
 * (default 5,000,000) as the scale part does, into PostgreSQL database PROBE_DB (default reftrail_probe, kept for the
 * next run: drop it when done), then runs the steps of `reftrail prune` one at a time with 1.5 s between them, a
 * writer recording an event every 20 ms throughout, and prints the steps' timeline and the slowest writes.
 *
 *   node --import tsx bench/prune-steps.ts      PROBE_STEPS: any of cli-noop,count,detach,drop,cli (or none)
 *
 * Each run takes the oldest month left: `count`, `detach` and `drop` are a month's prune by hand, `cli` the whole
 * command on the next month, `cli-noop` the command's start with nothing to drop.
 */
import { execFile } from "node:child_process";
import { loadavg } from "node:os";
import { promisify } from "node:util";
import pg from "pg";
import { buildServices } from "../src/build-services.ts";
import { loadConfig } from "../src/config.ts";
import { openDatabase } from "../src/store/database.ts";
import { migrateDatabase } from "../src/store/prisma/migration-runner.ts";
import { TEST_WEBHOOK_SECRET_KEY } from "../test/support/test-server.ts";

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const events = Number(process.env.PROBE_EVENTS ?? 5_000_000);
const name = process.env.PROBE_DB ?? "reftrail_probe";
const admin = new pg.Client({ connectionString: "postgresql://postgres@127.0.0.1:5432/postgres" });
await admin.connect();
const exists = (await admin.query(`SELECT 1 FROM pg_database WHERE datname = $1`, [name])).rowCount === 1;
const url = `postgresql://postgres@127.0.0.1:5432/${name}`;
if (!exists) {
  await admin.query(`CREATE DATABASE "${name}"`);
  await migrateDatabase(url);
}
const client = new pg.Client({ connectionString: url });
await client.connect();
const database = await openDatabase(url);
const config = loadConfig({ NODE_ENV: "test", DATABASE_URL: url, WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY });
const services = buildServices(config, database);
const big = "0190a000-0000-7000-8000-000000000000";
let organizationId: string;
if (!exists) {
  const t = performance.now();
  const { organization } = await services.organizations.createOrganization("scale");
  organizationId = organization.id;
  await client.query(
    `INSERT INTO "shipping_references" ("id", "organization_id", "container_id", "carrier_code", "active",
       "auto_unsubscribed", "consecutive_failures", "created_at", "updated_at")
     SELECT '0190a000-0000-7000-8000-' || lpad(to_hex(r), 12, '0'), $1, 'CSQU' || lpad(r::text, 7, '0'), 'MAEU',
       true, false, 0, now(), now()
     FROM generate_series(0, 19999) AS r`,
    [organizationId],
  );
  await client.query(
    `SELECT "lifecycle_events_ensure_month"(m) FROM generate_series(
       (now() AT TIME ZONE 'UTC') - 20 * interval '30.4 days', (now() AT TIME ZONE 'UTC'), interval '1 month') AS m`,
  );
  await client.query(
    `INSERT INTO "lifecycle_events" ("id", "organization_id", "reference_id", "type", "occurred_at", "detail",
       "reference_tags")
     SELECT substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(m, 1, 3) || '-8' || substr(m, 4, 3) || '-'
         || substr(m, 7, 12),
       $1, ref, (ARRAY['extraction_succeeded', 'estimated_arrival_changed', 'reference_update_created',
         'extraction_failed'])[1 + n % 4],
       ts, jsonb_build_object('reference_id', ref, 'organization_id', $1::text, 'previous', NULL,
         'current', to_char(ts, 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
       jsonb_build_array(jsonb_build_object('id', '0190a000-0000-7000-8000-0000000000aa', 'name', 'urgent'))
     FROM (
       SELECT n, (now() AT TIME ZONE 'UTC') - (20 * interval '30.4 days') * (1 - n::float8 / $2::int) AS ts,
         '0190a000-0000-7000-8000-' || lpad(to_hex(CASE WHEN n % 50 = 0 THEN 0 ELSE n % 20000 END), 12, '0') AS ref,
         md5(n::text) AS m
       FROM generate_series(1, $2::int) AS n) AS s,
     LATERAL (SELECT lpad(to_hex((extract(epoch FROM s.ts) * 1000)::bigint), 12, '0') AS h) AS hex`,
    [organizationId, events],
  );
  await client.query(`ANALYZE "lifecycle_events"`);
  console.log(`seeded ${events} in ${((performance.now() - t) / 1000).toFixed(0)} s`);
} else {
  organizationId = (await client.query(`SELECT "id" FROM "organizations" LIMIT 1`)).rows[0].id;
}
const t0 = performance.now();
const now = () => performance.now() - t0;
const writes: { start: number; ms: number }[] = [];
const marks: { at: number; step: string; ms?: number }[] = [];
let writing = true;
const writer = (async () => {
  while (writing) {
    const start = now();
    await services.referenceTracking.recordExtraction(organizationId, big, { status: "succeeded" });
    writes.push({ start, ms: now() - start });
    await sleep(20);
  }
})();
async function step(label: string, work: () => Promise<unknown>) {
  const at = now();
  await work();
  marks.push({ at, step: label, ms: now() - at });
  await sleep(1500);
}
await sleep(2000);
const steps = (process.env.PROBE_STEPS ?? "cli-noop,count,detach,drop").split(",");
if (steps.includes("cli-noop"))
  await step("cli prune, nothing to drop", () =>
    run("node", ["bin/reftrail.mjs", "prune"], {
      env: { ...process.env, DATABASE_URL: url, RETENTION_MONTHS: "99", NODE_ENV: "production" },
    }),
  );
const months = (
  await client.query<{ partition: string }>(
    `SELECT "partition"::text AS "partition" FROM "lifecycle_events_months"() ORDER BY "starts_at" LIMIT 1`,
  )
).rows;
for (const { partition } of months) {
  if (steps.includes("count"))
    await step(`count ${partition}`, () => client.query(`SELECT COUNT(*) FROM ${partition}`));
  if (steps.includes("detach"))
    await step(`detach ${partition}`, () =>
      client.query(`ALTER TABLE "lifecycle_events" DETACH PARTITION ${partition} CONCURRENTLY`),
    );
  if (steps.includes("drop")) await step(`drop ${partition}`, () => client.query(`DROP TABLE ${partition}`));
}
if (steps.includes("cli")) {
  const left = (await client.query(`SELECT COUNT(*) AS n FROM "lifecycle_events_months"()`)).rows[0].n;
  await step(`cli prune of the oldest month`, () =>
    run("node", ["bin/reftrail.mjs", "prune"], {
      env: { ...process.env, DATABASE_URL: url, RETENTION_MONTHS: String(Number(left) - 4), NODE_ENV: "production" },
    }),
  );
}
writing = false;
await writer;
console.log(`load ${loadavg()[0]!.toFixed(2)}; ${writes.length} writes`);
for (const m of marks) console.log(`${m.at.toFixed(0).padStart(7)} ms  ${m.step}: ${m.ms!.toFixed(0)} ms`);
const sorted = [...writes].sort((a, b) => b.ms - a.ms);
console.log(`p50 ${[...writes].sort((a, b) => a.ms - b.ms)[Math.floor(writes.length / 2)]!.ms.toFixed(1)} ms`);
for (const w of sorted.slice(0, 8)) console.log(`slow write at ${w.start.toFixed(0)} ms: ${w.ms.toFixed(1)} ms`);
await database.close();
await client.end();
await admin.end();
process.exit(0);
