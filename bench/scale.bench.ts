import { execFile } from "node:child_process";
import { loadavg } from "node:os";
import { promisify } from "node:util";
import pg from "pg";
import { buildServices } from "../src/build-services.ts";
import { loadConfig } from "../src/config.ts";
import { openDatabase } from "../src/store/database.ts";
import { createTestDatabase, TEST_WEBHOOK_SECRET_KEY } from "../test/support/test-server.ts";
import { measureScaleOverHttp } from "./scale-http.ts";
import { intSetting } from "./settings.ts";

/*
 * Part `scale` (issue 36): the lifecycle log at platform scale on PostgreSQL. A 20-month log of
 * BENCH_SCALE_EVENTS events (default 5,000,000), seeded with generate_series straight into the partitioned log as
 * an import would (the seven columns; UUIDv7 ids whose time is the event's; one organization, 20,000 references,
 * one of them holding 2 % of the log), then:
 * - seed time, and bytes per event (table + TOAST + indexes of every partition);
 * - p50 of a point read of a reference and of its pages (first, deep — after BENCH_SCALE_DEEP_PAGES pages —,
 *   by type: one the big reference has for half of its events; a type it never has reads all of its events, as
 *   before partitioning), on the big reference, through the services (no HTTP, no cache);
 * - the same reads over HTTP (bench/scale-http.ts): the real server in a child process, `Cache-Control:
 *   no-cache`, REST and GraphQL, on the big reference and on a typical one (1/20,000 of the log);
 * - `node bin/reftrail.mjs prune` with RETENTION_MONTHS=18 while a writer records an event every 20 ms through
 *   the services: prune time, bytes given back (database size before and after), the writer's p50/p99 and errors,
 *   and its slowest write among those that ended while the prune ran.
 */

const run = promisify(execFile);
const REFERENCES = 20_000;
const MONTHS = 20;

const percentile = (sorted: readonly number[], share: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * share))] ?? NaN;

async function timed(times: number, work: () => Promise<unknown>): Promise<number> {
  const samples: number[] = [];
  for (let index = 0; index < times; index++) {
    const start = performance.now();
    await work();
    samples.push(performance.now() - start);
  }
  return percentile(
    samples.sort((a, b) => a - b),
    0.5,
  );
}

export async function runScaleBench(): Promise<Record<string, unknown>> {
  const events = intSetting("BENCH_SCALE_EVENTS", 5_000_000, 10_000);
  const deepPages = intSetting("BENCH_SCALE_DEEP_PAGES", 200, 1);
  const testDatabase = await createTestDatabase("postgres", "reftrail_bench_scale");
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
    // Through the service, for an API key the HTTP rows can use.
    const { organization, apiKey } = await services.organizations.createOrganization("scale");
    const organizationId = organization.id;
    await client.query(
      `INSERT INTO "shipping_references" ("id", "organization_id", "container_id", "carrier_code", "active",
         "auto_unsubscribed", "consecutive_failures", "created_at", "updated_at")
       SELECT '0190a000-0000-7000-8000-' || lpad(to_hex(r), 12, '0'), $1, 'CSQU' || lpad(r::text, 7, '0'), 'MAEU',
         true, false, 0, now(), now()
       FROM generate_series(0, $2::int - 1) AS r`,
      [organizationId, REFERENCES],
    );
    // The months of the log, as an import makes them.
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
    const bytes = async () => {
      const { rows } = await client.query<{ bytes: string; events: string }>(
        `SELECT (SELECT SUM(pg_total_relation_size(m."partition")) FROM "lifecycle_events_months"() m) AS "bytes",
           (SELECT COUNT(*) FROM "lifecycle_events") AS "events"`,
      );
      return { bytes: Number(rows[0]!.bytes), events: Number(rows[0]!.events) };
    };
    const seeded = await bytes();

    const big = "0190a000-0000-7000-8000-000000000000";
    const list = (input: Parameters<typeof services.lifecycleLog.listEvents>[2]) =>
      services.lifecycleLog.listEvents(organizationId, big, input);
    let cursor: string | undefined;
    for (let page = 0; page < deepPages; page++) cursor = (await list({ limit: 50, cursor })).nextCursor!;
    const reads = {
      point_ms: await timed(200, () => services.references.getReference(organizationId, big)),
      first_page_ms: await timed(200, () => list({ limit: 50, order: "desc" })),
      oldest_page_ms: await timed(200, () => list({ limit: 50 })),
      deep_page_ms: await timed(200, () => list({ limit: 50, cursor })),
      by_type_ms: await timed(200, () => list({ limit: 50, types: ["reference_update_created"], order: "desc" })),
    };
    const http = await measureScaleOverHttp({
      databaseUrl: testDatabase.url,
      apiKey: apiKey.key,
      references: { big, typical: "0190a000-0000-7000-8000-000000000001" },
      deepPages,
    });
    const httpLoadAverage = loadavg()[0]!.toFixed(1);

    // The prune, with a writer beside it.
    const sizeBefore = Number((await client.query(`SELECT pg_database_size(current_database()) AS s`)).rows[0].s);
    const latencies: number[] = [];
    /** The latencies of the writes that ended while the prune ran. */
    const duringPrune: number[] = [];
    let pruning = false;
    let errors = 0;
    let writing = true;
    const writer = (async () => {
      while (writing) {
        const start = performance.now();
        try {
          await services.referenceTracking.recordExtraction(organizationId, big, { status: "succeeded" });
        } catch {
          errors += 1;
        }
        latencies.push(performance.now() - start);
        if (pruning) duringPrune.push(performance.now() - start);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const pruneLoadAverage = loadavg()[0]!.toFixed(1);
    const pruneStart = performance.now();
    pruning = true;
    const { stdout } = await run("node", ["bin/reftrail.mjs", "prune"], {
      env: { ...process.env, DATABASE_URL: testDatabase.url, RETENTION_MONTHS: "18", NODE_ENV: "production" },
    });
    pruning = false;
    const pruneSeconds = (performance.now() - pruneStart) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    writing = false;
    await writer;
    const sizeAfter = Number((await client.query(`SELECT pg_database_size(current_database()) AS s`)).rows[0].s);
    const pruned = JSON.parse(stdout) as { deleted: number };
    latencies.sort((a, b) => a - b);
    const report = {
      events,
      load_average: loadavg()[0]!.toFixed(1),
      seed_seconds: Number(seedSeconds.toFixed(1)),
      bytes_per_event: Math.round(seeded.bytes / seeded.events),
      ...Object.fromEntries(Object.entries(reads).map(([key, value]) => [key, Number(value.toFixed(2))])),
      first_page_over_point: Number((reads.first_page_ms / reads.point_ms).toFixed(2)),
      oldest_over_first_page: Number((reads.oldest_page_ms / reads.first_page_ms).toFixed(2)),
      http_load_average: httpLoadAverage,
      http,
      prune_load_average: pruneLoadAverage,
      pruned_events: pruned.deleted,
      prune_seconds: Number(pruneSeconds.toFixed(2)),
      bytes_given_back: sizeBefore - sizeAfter,
      given_back_over_pruned_share: Number(
        ((sizeBefore - sizeAfter) / sizeBefore / (pruned.deleted / seeded.events)).toFixed(2),
      ),
      writer_p50_ms: Number(percentile(latencies, 0.5).toFixed(1)),
      writer_p99_ms: Number(percentile(latencies, 0.99).toFixed(1)),
      writer_errors: errors,
      writes: latencies.length,
      writer_max_during_prune_ms: Number(Math.max(...duringPrune).toFixed(1)),
      writes_during_prune: duringPrune.length,
    };
    console.log(JSON.stringify(report, null, 1));
    return report;
  } finally {
    await database.close();
    await client.end();
    await testDatabase.drop();
  }
}
