/*
 * `npm run bench`: reftrail against the real server on 127.0.0.1, on SQLite and PostgreSQL. Each part seeds its
 * own databases (temp SQLite files, `reftrail_bench_*` PostgreSQL databases) and removes them at the end.
 *
 * Parts (BENCH_PARTS, comma-separated; default all, in this order):
 *   data           the headline: the data path beneath the read cache (bench/data-path.bench.ts) — random
 *                  keys, `Cache-Control: no-cache`, anchors in the same run, the same reads under an open-loop
 *                  write feed, server peak RSS, the database time of one request
 *   baseline       this checkout ÷ an older commit (BENCH_BASELINE_REF, default the previous round's main), same
 *                  run, builds alternating, both databases; the reference row again on each side beside an
 *                  open-loop write feed (BENCH_BASELINE_FEED_RATE writes/s, default BENCH_FEED_RATE; 0: none);
 *                  then the pipeline's stages, µs per request (bench/baseline-ref.bench.ts; BENCH_BASELINE_ROUNDS,
 *                  default 2)
 *   peer           PostGraphile 4 on the same PostgreSQL data, alternating rounds (bench/peer.bench.ts)
 *   cached         secondary: repeated requests that the read cache answers, and the lifecycle log's pages
 *                  (bench/cached-reads.bench.ts; `reads` is an alias)
 *   webhooks       webhook deliveries (bench/webhooks.bench.ts, webhooks-ordering.bench.ts, webhooks-fairness.bench.ts,
 *                  webhooks-brokers.bench.ts: RabbitMQ and NATS JetStream endpoints beside an HTTP one,
 *                  webhooks-drain.bench.ts: one HTTP endpoint's drain from outside `node dist/main.js`)
 *   subscriptions  live subscriptions (bench/subscriptions.bench.ts)
 *   polling        the feed to poll: 1,000 idle long polls' statements, commit -> long-poll answer
 *                  (bench/event-feed.bench.ts)
 *   isolation      one organization's feed scans (8 a second, each up to the scan's bound) beside another
 *                  organization's point reads: its p50 and p99 quiet and flooded (bench/feed-isolation.bench.ts)
 *   ingestion      single and bulk event writes (bench/ingestion.bench.ts)
 *   scale          PostgreSQL only: a 20-month log of BENCH_SCALE_EVENTS (5,000,000) events seeded in SQL; bytes
 *                  per event, page timings in process and over HTTP (the server in a child process, REST
 *                  and GraphQL, no cache), prune time, bytes given back, a writer's p99 during the prune
 *                  (bench/scale.bench.ts, bench/scale-http.ts; not in the default set: BENCH_PARTS=scale)
 *
 * Quick mode, the headline only at 2,000 references (about 2 minutes for both databases):
 *   BENCH_PARTS=data BENCH_DURATION_SECONDS=5 npm run bench
 *
 * Settings (environment), with defaults:
 *   BENCH_DATABASES          sqlite,postgres  databases to run (`peer` runs on PostgreSQL only)
 *   BENCH_DURATION_SECONDS   10        measured seconds of each load run
 *   BENCH_WARMUP_SECONDS     2         unmeasured load before each run, on the measured connections once each
 *                                      has had a response (bench/load-worker.mjs)
 *   BENCH_CONNECTIONS        50        concurrent connections of every load run (data, peer, cached)
 *   BENCH_DATA_REFERENCES    2000      data and peer: references seeded, or a comma-separated list of sizes
 *                                      (each measured on a fresh database)
 *   BENCH_SCALE              (unset)   `large`: BENCH_DATA_REFERENCES=2000,100000 (issue: how the cost grows)
 *   BENCH_DATA_TAGS          50        data and peer: tags of the organization; each reference carries 2
 *   BENCH_DATA_EVENTS        20        data and peer: lifecycle events per reference
 *   BENCH_FEED_RATE          100       data: extraction outcomes POSTed per second by the open-loop feed
 *   BENCH_DATA_MIXED         1         data: 0 skips the rows under the feed
 *   BENCH_DATA_TRACING       1         data: 0 skips the GraphQL rows with traces on (in-memory exporter)
 *   BENCH_DATA_BUDGET_OFF    1         data: 0 skips the GraphQL rows without the cost budget (its share)
 *   BENCH_DATA_VARIANT_ROUNDS 3        data: rounds of each of those rows, a default run and a variant run each
 *   BENCH_PEER_ROUNDS        3         peer: rounds per server (reftrail, PostGraphile, reftrail, …)
 *   BENCH_TAGS, BENCH_REFERENCES, BENCH_CREATED_EVENTS, BENCH_EVENTS, BENCH_SEQUENTIAL,
 *   BENCH_SEQUENTIAL_MAX_SECONDS, BENCH_TAG, BENCH_SQLITE_ANALYZE, BENCH_OUTPUT, BENCH_DEBUG
 *                                      cached: 1000 tags, 100000 references (0–3 tags each), a created event
 *                                      each, 1000000 events on one reference, 200 sequential requests per
 *                                      log position (at most 20 s), tag-0500, no ANALYZE, bench/results.json
 *   BENCH_INGESTION_*, BENCH_WEBHOOK_*, BENCH_SUBSCRIPTION_*, BENCH_POLL*   see the part's own file
 *   TEST_DATABASE_URL        postgresql://postgres@127.0.0.1:5432/postgres   PostgreSQL admin connection
 *
 * The data part writes its figures to BENCH_DATA_OUTPUT (bench/results-data.json, not committed). Absolute
 * figures move with whatever else the machine runs: compare ratios taken in the same run.
 */
// First: libraries read NODE_ENV when they load.
import "./production-env.ts";
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { LoadGenerator } from "./load.ts";
import { benchDatabases, intSetting } from "./settings.ts";
import type { DataPathSettings } from "./data-path.bench.ts";

const PARTS = [
  "data",
  "baseline",
  "peer",
  "cached",
  "webhooks",
  "subscriptions",
  "polling",
  "isolation",
  "ingestion",
  "scale",
] as const;

function selectedParts(): Set<string> {
  const wanted = (process.env.BENCH_PARTS ?? PARTS.filter((part) => part !== "scale").join(","))
    .split(",")
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => (part === "reads" ? "cached" : part));
  for (const part of wanted) {
    if (!(PARTS as readonly string[]).includes(part)) throw new Error(`BENCH_PARTS: unknown part "${part}"`);
  }
  return new Set(wanted);
}

function dataScales(): number[] {
  const raw = process.env.BENCH_DATA_REFERENCES ?? (process.env.BENCH_SCALE === "large" ? "2000,100000" : "2000");
  return raw.split(",").map((size) => {
    const value = Number(size.trim().replace(/_/g, ""));
    if (!Number.isInteger(value) || value < 100) throw new Error(`BENCH_DATA_REFERENCES: "${size}" is not ≥ 100`);
    return value;
  });
}

export function dataPathSettings(): DataPathSettings {
  return {
    databases: benchDatabases(),
    scales: dataScales(),
    tags: intSetting("BENCH_DATA_TAGS", 50, 2),
    eventsPerReference: intSetting("BENCH_DATA_EVENTS", 20, 1),
    connections: intSetting("BENCH_CONNECTIONS", 50, 1),
    durationSeconds: intSetting("BENCH_DURATION_SECONDS", 10, 1),
    warmupSeconds: intSetting("BENCH_WARMUP_SECONDS", 2),
    feedRate: intSetting("BENCH_FEED_RATE", 100, 1),
    mixed: intSetting("BENCH_DATA_MIXED", 1) !== 0,
    tracing: intSetting("BENCH_DATA_TRACING", 1) !== 0,
    budgetOff: intSetting("BENCH_DATA_BUDGET_OFF", 1) !== 0,
    variantRounds: intSetting("BENCH_DATA_VARIANT_ROUNDS", 3, 1),
  };
}

async function main(): Promise<void> {
  const parts = selectedParts();
  const loadAtStart = loadavg();
  const results: Record<string, unknown> = { at: new Date().toISOString(), node: process.version };
  if (parts.has("data")) {
    const { runDataPathBench } = await import("./data-path.bench.ts");
    const { formatDataPath } = await import("./data-path.report.ts");
    const settings = dataPathSettings();
    const loads = new LoadGenerator();
    try {
      const reports = await runDataPathBench(settings, loads);
      console.log(`\n${formatDataPath(reports, settings, loadAtStart)}\n`);
      results.data = { settings, reports, loadAtStart, loadAtEnd: loadavg() };
    } finally {
      await loads.close();
    }
  }
  if (parts.has("baseline")) {
    const { DEFAULT_BASELINE_REF, formatBaseline, runBaselineBench } = await import("./baseline-ref.bench.ts");
    const data = dataPathSettings();
    const loads = new LoadGenerator();
    try {
      const report = await runBaselineBench(
        {
          ref: process.env.BENCH_BASELINE_REF ?? DEFAULT_BASELINE_REF,
          databases: data.databases,
          references: data.scales[0]!,
          tags: data.tags,
          eventsPerReference: data.eventsPerReference,
          connections: data.connections,
          durationSeconds: data.durationSeconds,
          warmupSeconds: data.warmupSeconds,
          rounds: intSetting("BENCH_BASELINE_ROUNDS", 2, 1),
          feedRate: intSetting("BENCH_BASELINE_FEED_RATE", data.feedRate),
        },
        loads,
      );
      console.log(`\n${formatBaseline(report)}\n`);
      results.baseline = report;
    } finally {
      await loads.close();
    }
  }
  if (parts.has("peer")) {
    const { runPeerBench } = await import("./peer.bench.ts");
    results.peer = await runPeerBench({ ...dataPathSettings(), rounds: intSetting("BENCH_PEER_ROUNDS", 3, 1) });
  }
  if (results.data || results.peer || results.baseline) {
    const output = process.env.BENCH_DATA_OUTPUT ?? join(import.meta.dirname, "results-data.json");
    writeFileSync(output, `${JSON.stringify(results, null, 2)}\n`);
    console.error(`[bench] data path figures written to ${output}`);
  }
  if (parts.has("cached")) {
    console.log("\nCached rows (secondary) — parts A and B");
    const { runCachedReads } = await import("./cached-reads.bench.ts");
    await runCachedReads();
  }
  if (parts.has("webhooks")) {
    console.log("\nPart C — webhook deliveries");
    const { runWebhookBench } = await import("./webhooks.bench.ts");
    await runWebhookBench();
    const { runWebhookOrderingBench } = await import("./webhooks-ordering.bench.ts");
    await runWebhookOrderingBench();
    const { runWebhookFairnessBench } = await import("./webhooks-fairness.bench.ts");
    await runWebhookFairnessBench();
    const { runWebhookBrokersBench } = await import("./webhooks-brokers.bench.ts");
    await runWebhookBrokersBench();
    const { runWebhookDrainBench } = await import("./webhooks-drain.bench.ts");
    await runWebhookDrainBench();
  }
  if (parts.has("subscriptions")) {
    console.log("\nPart D — live subscriptions");
    const { runSubscriptionBench } = await import("./subscriptions.bench.ts");
    await runSubscriptionBench();
  }
  if (parts.has("polling")) {
    console.log("\nPart D2 — the feed to poll");
    const { runEventFeedBench } = await import("./event-feed.bench.ts");
    await runEventFeedBench();
  }
  if (parts.has("isolation")) {
    console.log("\nPart D3 — one organization's feed scans beside another's point reads");
    const { runFeedIsolationBench } = await import("./feed-isolation.bench.ts");
    await runFeedIsolationBench();
  }
  if (parts.has("ingestion")) {
    console.log("\nPart E — ingestion (single events and bulk)");
    const { runIngestionBench } = await import("./ingestion.bench.ts");
    await runIngestionBench();
  }
  if (parts.has("scale")) {
    console.log("\nPart F — the lifecycle log at scale (PostgreSQL)");
    const { runScaleBench } = await import("./scale.bench.ts");
    await runScaleBench();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
