/*
 * A writer's latency during `reftrail prune` on PostgreSQL (issue 50.4). Seeds a 20-month log of PRUNE_EVENTS
 * events (default 5,000,000) as the scale part does (bench/scale.bench.ts: generate_series straight into the
 * partitioned log, then ANALYZE as autovacuum would), measures a writer recording an event every 20 ms through the
 * services alone for 10 s, then runs `node bin/reftrail.mjs prune` (RETENTION_MONTHS=18) as the CLI beside the same
 * writer, and prints: the writer's p50/p99 alone and during the prune, the prune's time, the events it reported
 * (the catalog's estimate) against the events really gone, and the months dropped.
 *
 *   PRUNE_EVENTS=5000000 node --import tsx bench/prune-writer.ts
 */
import { execFile } from "node:child_process";
import { loadavg } from "node:os";
import { promisify } from "node:util";
import pg from "pg";
import { buildServices } from "../src/build-services.ts";
import { loadConfig } from "../src/config.ts";
import { openDatabase } from "../src/store/database.ts";
import { createTestDatabase, TEST_WEBHOOK_SECRET_KEY } from "../test/support/test-server.ts";
import { intSetting } from "./settings.ts";

const run = promisify(execFile);
const REFERENCES = 20_000;
const MONTHS = 20;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const percentile = (samples: readonly number[], share: number) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return Number((sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * share))] ?? NaN).toFixed(1));
};

const events = intSetting("PRUNE_EVENTS", 5_000_000, 10_000);
const testDatabase = await createTestDatabase("postgres", "reftrail_bench_prune");
const client = new pg.Client({ connectionString: testDatabase.url });
await client.connect();
const database = await openDatabase(testDatabase.url);
try {
  const config = loadConfig({
    NODE_ENV: "test",
    DATABASE_URL: testDatabase.url,
    WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY,
  });
  const services = buildServices(config, database);
  const seedStart = performance.now();
  const { organization } = await services.organizations.createOrganization("prune");
  const organizationId = organization.id;
  await client.query(
    `INSERT INTO "shipping_references" ("id", "organization_id", "container_id", "carrier_code", "active",
       "auto_unsubscribed", "consecutive_failures", "created_at", "updated_at")
     SELECT '0190a000-0000-7000-8000-' || lpad(to_hex(r), 12, '0'), $1, 'CSQU' || lpad(r::text, 7, '0'), 'MAEU',
       true, false, 0, now(), now()
     FROM generate_series(0, $2::int - 1) AS r`,
    [organizationId, REFERENCES],
  );
  await client.query(
    `SELECT "lifecycle_events_ensure_month"(m) FROM generate_series(
       (now() AT TIME ZONE 'UTC') - $1::int * interval '30.4 days', (now() AT TIME ZONE 'UTC'), interval '1 month') AS m`,
    [MONTHS],
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
       SELECT n, (now() AT TIME ZONE 'UTC') - ($3::int * interval '30.4 days') * (1 - n::float8 / $2::int) AS ts,
         '0190a000-0000-7000-8000-' || lpad(to_hex(CASE WHEN n % 50 = 0 THEN 0 ELSE n % $4::int END), 12, '0') AS ref,
         md5(n::text) AS m
       FROM generate_series(1, $2::int) AS n) AS s,
     LATERAL (SELECT lpad(to_hex((extract(epoch FROM s.ts) * 1000)::bigint), 12, '0') AS h) AS hex`,
    [organizationId, events, MONTHS, REFERENCES],
  );
  await client.query(`ANALYZE "lifecycle_events"`);
  const seedSeconds = (performance.now() - seedStart) / 1000;
  const count = async () => Number((await client.query(`SELECT COUNT(*) AS n FROM "lifecycle_events"`)).rows[0].n);
  const months = async () =>
    Number((await client.query(`SELECT COUNT(*) AS n FROM "lifecycle_events_months"()`)).rows[0].n);

  const big = "0190a000-0000-7000-8000-000000000000";
  const alone: number[] = [];
  const duringPrune: number[] = [];
  let phase = "other" as "alone" | "prune" | "other";
  let writing = true;
  let errors = 0;
  let written = 0;
  const writer = (async () => {
    while (writing) {
      const start = performance.now();
      try {
        await services.referenceTracking.recordExtraction(organizationId, big, { status: "succeeded" });
        written += 1;
      } catch {
        errors += 1;
      }
      const took = performance.now() - start;
      if (phase === "alone") alone.push(took);
      if (phase === "prune") duringPrune.push(took);
      await sleep(20);
    }
  })();
  await sleep(2_000);
  phase = "alone";
  await sleep(10_000);
  phase = "other";
  const before = await count();
  const monthsBefore = await months();
  const loadBefore = loadavg()[0]!.toFixed(1);
  const writtenBefore = written;
  const pruneStart = performance.now();
  phase = "prune";
  const { stdout } = await run("node", ["bin/reftrail.mjs", "prune"], {
    env: { ...process.env, DATABASE_URL: testDatabase.url, RETENTION_MONTHS: "18", NODE_ENV: "production" },
  });
  phase = "other";
  const pruneSeconds = (performance.now() - pruneStart) / 1000;
  await sleep(1_000);
  writing = false;
  await writer;
  const after = await count();
  const gone = before + (written - writtenBefore) - after;
  const report = {
    events,
    seed_seconds: Number(seedSeconds.toFixed(1)),
    load_average_before_prune: loadBefore,
    writer_alone_p50_ms: percentile(alone, 0.5),
    writer_alone_p99_ms: percentile(alone, 0.99),
    writes_alone: alone.length,
    prune_seconds: Number(pruneSeconds.toFixed(2)),
    writer_during_prune_p50_ms: percentile(duringPrune, 0.5),
    writer_during_prune_p99_ms: percentile(duringPrune, 0.99),
    writer_during_prune_max_ms: percentile(duringPrune, 1),
    writes_during_prune: duringPrune.length,
    writer_errors: errors,
    months_dropped: monthsBefore - (await months()),
    reported_events: (JSON.parse(stdout) as { deleted: number }).deleted,
    events_gone: gone,
  };
  console.log(JSON.stringify(report, null, 1));
} finally {
  await database.close();
  await client.end();
  await testDatabase.drop();
}
