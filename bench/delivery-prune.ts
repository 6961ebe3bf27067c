/*
 * What pruning succeeded webhook deliveries costs on PostgreSQL, with a writer beside it (issue 36;
 * docs/scaling.md, "The other tables that grow with the log"): PROBE_DELIVERIES (default 200,000) deliveries that
 * succeeded 40 days ago, each with one attempt, then `reftrail prune` while a writer records an event every 20 ms.
 *
 *   node --import tsx bench/delivery-prune.ts
 */
import { execFile } from "node:child_process";
import { loadavg } from "node:os";
import { promisify } from "node:util";
import pg from "pg";
import { buildServices } from "../src/build-services.ts";
import { loadConfig } from "../src/config.ts";
import { openDatabase } from "../src/store/database.ts";
import { createTestDatabase, TEST_WEBHOOK_SECRET_KEY } from "../test/support/test-server.ts";

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const n = Number(process.env.PROBE_DELIVERIES ?? 200_000);
const testDatabase = await createTestDatabase("postgres", "reftrail_probe_deliveries");
const url = testDatabase.url;
const client = new pg.Client({ connectionString: url });
await client.connect();
const database = await openDatabase(url);
const config = loadConfig({ NODE_ENV: "test", DATABASE_URL: url, WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY });
const services = buildServices(config, database);
const { organization } = await services.organizations.createOrganization("probe");
const { endpoint } = await services.webhooks.createEndpoint(organization.id, { url: "http://127.0.0.1:9/hook" });
const reference = await services.references.createReference(organization.id, {
  containerId: "CSQU3054383",
  carrierCode: "MAEU",
});
const t = performance.now();
await client.query(
  `INSERT INTO "webhook_deliveries" ("id", "organization_id", "endpoint_id", "event_id", "event_type", "body", "status",
     "attempt_count", "next_attempt_at", "created_at", "updated_at", "event_occurred_at")
   SELECT gen_random_uuid()::text, $1, $2, gen_random_uuid()::text, 'extraction_succeeded', repeat('x', 550),
     'succeeded', 1, NULL, now() - interval '40 days', now() - interval '40 days' + (g || ' ms')::interval,
     now() - interval '40 days'
   FROM generate_series(1, $3::int) AS g`,
  [organization.id, endpoint.id, n],
);
await client.query(
  `INSERT INTO "webhook_attempts" ("id", "delivery_id", "attempted_at", "status_code", "latency_ms")
   SELECT gen_random_uuid()::text, "id", "updated_at", 200, 5 FROM "webhook_deliveries"`,
);
await client.query(`VACUUM ANALYZE "webhook_deliveries"`);
await client.query(`VACUUM ANALYZE "webhook_attempts"`);
console.log(`seeded ${n} deliveries and attempts in ${((performance.now() - t) / 1000).toFixed(1)} s`);
const referenceId = reference.id;
const t0 = performance.now();
const writes: number[] = [];
const during: number[] = [];
let pruning = false;
let writing = true;
const writer = (async () => {
  while (writing) {
    const start = performance.now();
    await services.referenceTracking.recordExtraction(organization.id, referenceId, { status: "succeeded" });
    writes.push(performance.now() - start);
    if (pruning) during.push(performance.now() - start);
    await sleep(20);
  }
})();
await sleep(1000);
pruning = true;
const pruneStart = performance.now();
const { stdout } = await run("node", ["bin/reftrail.mjs", "prune"], {
  env: { ...process.env, DATABASE_URL: url, NODE_ENV: "production" },
});
const pruneMs = performance.now() - pruneStart;
pruning = false;
await sleep(1000);
writing = false;
await writer;
writes.sort((a, b) => a - b);
console.log(stdout.trim());
console.log(
  `prune ${(pruneMs / 1000).toFixed(2)} s (${Math.round(n / (pruneMs / 1000))} deliveries/s with their attempts); ` +
    `writer p50 ${writes[Math.floor(writes.length / 2)]!.toFixed(1)} ms, p99 ${writes[Math.floor(writes.length * 0.99)]!.toFixed(1)} ms, ` +
    `max during prune ${Math.max(...during).toFixed(1)} ms over ${during.length} writes; load ${loadavg()[0]!.toFixed(2)}; ${((performance.now() - t0) / 1000).toFixed(1)} s in all`,
);
await database.close();
await client.end();
await testDatabase.drop();
process.exit(0);
