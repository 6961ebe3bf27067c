/*
 * One organization's costly reads against another organization's point reads (issue 49.3), on one instance:
 *
 * - the log: organization A holds BENCH_ISOLATION_EVENTS (100,000) lifecycle events, written through the API
 *   (bulk ingestions of 500 items, one transaction each, as a tracking integration writes them); organization B
 *   holds 200 references.
 * - quiet: B reads its references by id (random keys, `Cache-Control: no-cache`), BENCH_ISOLATION_READ_RATE
 *   (40) per second for BENCH_ISOLATION_SECONDS (10): p50, p99.
 * - flooded: the same while A sends BENCH_ISOLATION_SCAN_RATE (8) feed scans per second that match nothing
 *   (`GET /v1/events?limit=1&tag_names=<a tag no event carries>`, each reading the scan's bound of rows), and
 *   again with a tag name no tag bears. A's answers are counted by status (200, 429).
 * Goal (the issue's): B's p50 flooded ≤ max(3 × quiet, 20 ms).
 *
 * Settings: BENCH_DATABASES (sqlite,postgres), the ones above, TEST_DATABASE_URL (PostgreSQL admin connection).
 * Run alone: `node --import tsx bench/feed-isolation.bench.ts`.
 */
import "./production-env.ts";
import { loadavg } from "node:os";
import { Agent, request } from "undici";
import { buildServices } from "../src/build-services.ts";
import { loadConfig } from "../src/config.ts";
import { openDatabase } from "../src/store/database.ts";
import { startServerProcess, type ServerProcess } from "../test/support/server-process.ts";
import { createTestDatabase, TEST_WEBHOOK_SECRET_KEY, type TestDatabase } from "../test/support/test-server.ts";
import { benchDatabases, intSetting } from "./settings.ts";

type Kind = "sqlite" | "postgres";

const settings = {
  databases: benchDatabases(),
  events: intSetting("BENCH_ISOLATION_EVENTS", 100_000, 1_000),
  readRate: intSetting("BENCH_ISOLATION_READ_RATE", 40, 1),
  scanRate: intSetting("BENCH_ISOLATION_SCAN_RATE", 8, 1),
  seconds: intSetting("BENCH_ISOLATION_SECONDS", 10, 1),
};

const started = performance.now();
const log = (message: string) =>
  console.error(`[bench ${((performance.now() - started) / 1000).toFixed(0).padStart(4)}s] isolation: ${message}`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export interface IsolationRow {
  readonly kind: Kind;
  readonly phase: string;
  readonly reads: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly scans: Readonly<Record<string, number>>;
  /** A's scans' p50, ms. */
  readonly scanP50: number;
  readonly load: number;
}

const agent = new Agent({ connections: 64, pipelining: 1 });

async function call(base: string, key: string, method: string, path: string, body?: unknown) {
  const response = await request(`${base}${path}`, {
    method: method as "GET",
    dispatcher: agent,
    headers: {
      authorization: `Bearer ${key}`,
      "cache-control": "no-cache",
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await response.body.text();
  return { status: response.statusCode, body: text };
}

/** Calls `each` `rate` times a second for `seconds`, each call on its own (an open loop, as clients arrive). */
async function openLoop(rate: number, seconds: number, each: () => Promise<void>): Promise<void> {
  const calls: Promise<void>[] = [];
  const start = performance.now();
  for (let i = 0; i < rate * seconds; i++) {
    const due = start + (i * 1_000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    calls.push(each());
  }
  await Promise.all(calls);
}

async function measure(kind: Kind, server: ServerProcess, b: Org, a: Org, phase: string, scanPath: string | null) {
  const times: number[] = [];
  const scans: Record<string, number> = {};
  const scanTimes: number[] = [];
  const reads = openLoop(settings.readRate, settings.seconds, async () => {
    const id = b.references[Math.floor(Math.random() * b.references.length)]!;
    const began = performance.now();
    const answer = await call(server.url, b.key, "GET", `/v1/references/${id}`);
    if (answer.status !== 200) throw new Error(`B's read answered ${answer.status}: ${answer.body.slice(0, 200)}`);
    times.push(performance.now() - began);
  });
  const flood = scanPath
    ? openLoop(settings.scanRate, settings.seconds, async () => {
        const began = performance.now();
        const answer = await call(server.url, a.key, "GET", scanPath);
        scanTimes.push(performance.now() - began);
        scans[answer.status] = (scans[answer.status] ?? 0) + 1;
      })
    : Promise.resolve();
  await Promise.all([reads, flood]);
  times.sort((x, y) => x - y);
  return {
    kind,
    phase,
    reads: times.length,
    p50: percentile(times, 0.5),
    p99: percentile(times, 0.99),
    max: times.at(-1)!,
    scans,
    scanP50: percentile(
      scanTimes.sort((x, y) => x - y),
      0.5,
    ),
    load: loadavg()[0]!,
  } satisfies IsolationRow;
}

interface Org {
  readonly key: string;
  readonly references: readonly string[];
}

async function runOn(kind: Kind): Promise<IsolationRow[]> {
  const database: TestDatabase = await createTestDatabase(kind, "reftrail_bench");
  let server: ServerProcess | undefined;
  try {
    const opened = await openDatabase(database.url);
    const config = loadConfig({
      NODE_ENV: "test",
      DATABASE_URL: database.url,
      WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY,
    });
    const services = buildServices(config, opened);
    const orgA = await services.organizations.createOrganization("flooding");
    const orgB = await services.organizations.createOrganization("quiet");
    await opened.close();
    server = await startServerProcess({
      DATABASE_URL: database.url,
      NODE_ENV: "production",
      LOG_LEVEL: "info",
      WEBHOOK_WORKER: "off",
      // B's reads alone pass 600 a minute; A's scans (8 a second) stay under it: the per-minute guard would
      // refuse B, not A, and is not what is measured.
      RATE_LIMIT_PER_MINUTE: "0",
    });
    const aKey = orgA.apiKey.key;
    const bKey = orgB.apiKey.key;
    await call(server.url, aKey, "POST", "/v1/tags", { name: "rare" });
    const created = await call(server.url, aKey, "POST", "/v1/references", {
      booking_number: "BK-LOG",
      carrier_code: "MSCU",
    });
    const logReference = (JSON.parse(created.body) as { reference: { id: string } }).reference.id;
    log(`${kind}: writing ${settings.events} events`);
    for (let written = 0; written < settings.events; written += 500) {
      const items = Array.from({ length: Math.min(500, settings.events - written) }, () => ({
        kind: "extraction",
        reference_id: logReference,
        status: "succeeded",
      }));
      const answer = await call(server.url, aKey, "POST", "/v1/ingestions", { items });
      if (answer.status !== 201) throw new Error(`ingestion answered ${answer.status}: ${answer.body.slice(0, 300)}`);
    }
    const bReferences: string[] = [];
    for (let i = 0; i < 200; i++) {
      const answer = await call(server.url, bKey, "POST", "/v1/references", {
        booking_number: `BK-Q-${i}`,
        carrier_code: "MAEU",
      });
      bReferences.push((JSON.parse(answer.body) as { reference: { id: string } }).reference.id);
    }
    const a = { key: aKey, references: [logReference] };
    const b = { key: bKey, references: bReferences };
    log(`${kind}: measuring`);
    const rows = [
      await measure(kind, server, b, a, "quiet", null),
      await measure(kind, server, b, a, "scans, tag no event carries", "/v1/events?limit=1&tag_names=rare"),
      await measure(kind, server, b, a, "scans, tag name no tag bears", "/v1/events?limit=1&tag_names=nonexistent-tag"),
    ];
    return rows;
  } finally {
    if (server) {
      server.child.kill("SIGTERM");
      await server.exited();
    }
    if (process.env.BENCH_KEEP_DATABASE === "1") log(`kept ${database.url}`);
    else await database.drop();
  }
}

export function formatIsolation(rows: readonly IsolationRow[]): string {
  const lines = [
    "| db | B's reads while A… | reads | p50 ms | p99 ms | max ms | A's answers | A's p50 ms | load |",
    "|---|---|--:|--:|--:|--:|---|--:|--:|",
  ];
  for (const row of rows) {
    const scans = Object.entries(row.scans)
      .map(([status, count]) => `${count}× ${status}`)
      .join(", ");
    lines.push(
      `| ${row.kind} | ${row.phase} | ${row.reads} | ${row.p50.toFixed(1)} | ${row.p99.toFixed(1)} | ${row.max.toFixed(0)} | ${scans || "-"} | ${Number.isNaN(row.scanP50) ? "-" : row.scanP50.toFixed(0)} | ${row.load.toFixed(1)} |`,
    );
  }
  return lines.join("\n");
}

export async function runFeedIsolationBench(): Promise<IsolationRow[]> {
  const rows: IsolationRow[] = [];
  try {
    for (const kind of settings.databases) rows.push(...(await runOn(kind)));
  } finally {
    await agent.close();
  }
  console.log(formatIsolation(rows));
  return rows;
}

if (import.meta.url === `file://${process.argv[1]}`) await runFeedIsolationBench();
