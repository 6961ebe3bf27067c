/*
 * The webhook part of `npm run bench` (part C, wired in by bench/run.ts; alone: `node --import tsx
 * bench/webhooks.bench.ts`): how fast instances deliver, and how long an event takes from being written to being
 * received, on SQLite and PostgreSQL, against a receiver on 127.0.0.1 that runs in its own thread
 * (bench/webhook-receiver.worker.mjs), answers at once, counts duplicate webhook-ids and TCP connections, and
 * checks every 10th signature with `standardwebhooks`.
 *
 *   drain        BENCH_WEBHOOK_BACKLOG deliveries (events × 10 endpoints) are queued due in an hour, server
 *                processes (`src/main.ts`, real servers on loopback) are started on the database, then the
 *                deliveries are made due at once: deliveries per second from the first arrival to the last. One
 *                instance on each database; on PostgreSQL also two instances (separate processes) on one database,
 *                with their ratio to one.
 *   steady       BENCH_WEBHOOK_RATE events per second for BENCH_WEBHOOK_SECONDS seconds to ten endpoints:
 *                written-to-received latency (the body's `occurred_at` to the arrival), writer and worker in this
 *                process.
 *   one slow     the same to ten endpoints of which one answers after BENCH_WEBHOOK_SLOW_MS (5 s): the latency of
 *                the nine others, and their p99 over the p99 of the ten-endpoint row (goal: below 1.2).
 *
 * Settings (environment): BENCH_DATABASES (sqlite,postgres), BENCH_WEBHOOK_BACKLOG (20000), BENCH_WEBHOOK_RATE
 * (20), BENCH_WEBHOOK_SECONDS (10), BENCH_WEBHOOK_SLOW_MS (5000), BENCH_WEBHOOK_INSTANCES (2: 1 skips the
 * two-instance row), TEST_DATABASE_URL (PostgreSQL admin connection). The worker runs with its defaults.
 * Everything it creates (temp SQLite files, `reftrail_bench_*` databases) is removed at the end.
 */
import { loadavg } from "node:os";
import { Worker } from "node:worker_threads";
import Sqlite from "better-sqlite3";
import pg from "pg";
import { buildApp, type App } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { openDatabase, sqliteFilePath } from "../src/store/database.ts";
import { startServerProcess, type ServerProcess } from "../test/support/server-process.ts";
import { createTestDatabase } from "../test/support/test-server.ts";
import { benchDatabases, intSetting, BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";

export type Kind = "sqlite" | "postgres";

const ENDPOINTS = 10;

const settings = {
  databases: benchDatabases(),
  backlog: intSetting("BENCH_WEBHOOK_BACKLOG", 20_000, ENDPOINTS),
  rate: intSetting("BENCH_WEBHOOK_RATE", 20, 1),
  seconds: intSetting("BENCH_WEBHOOK_SECONDS", 10, 1),
  slowMs: intSetting("BENCH_WEBHOOK_SLOW_MS", 5_000, 1),
  instances: intSetting("BENCH_WEBHOOK_INSTANCES", 2, 1),
  adminUrl: process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres",
};

/** Each database's scenarios use their own paths on the one receiver. */
const slowPathOf = (kind: Kind) => `/${kind}/slow/9`;
export const log = (message: string) => process.stderr.write(`[bench:webhooks] ${message}\n`);
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
export const fmtLoad = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(" / ");

// ---------------------------------------------------------------------------------------------------------------
// The receiver thread

export interface ReceivedRecord {
  readonly webhookId: string;
  readonly referenceId: string | null;
  readonly occurredAt: number;
  readonly receivedAt: number;
}

interface ReceiverSummary {
  readonly count: number;
  /** Requests whose webhook-id arrived before (on these paths). */
  readonly duplicates: number;
  /** TCP connections accepted so far (all paths). */
  readonly connections: number;
  /** Signatures checked so far, and those that failed (all paths). */
  readonly verified: number;
  readonly badSignatures: number;
}

export class ReceiverThread {
  private nextRequest = 0;
  private readonly waiting = new Map<number, (answer: any) => void>();

  private constructor(
    private readonly worker: Worker,
    readonly port: number,
  ) {
    worker.on("message", (message: { requestId?: number }) => {
      if (message.requestId === undefined) return;
      this.waiting.get(message.requestId)?.(message);
      this.waiting.delete(message.requestId);
    });
  }

  static async start(slowPaths: readonly string[], slowMs: number): Promise<ReceiverThread> {
    const worker = new Worker(new URL("./webhook-receiver.worker.mjs", import.meta.url), {
      workerData: { slowPaths, slowMs, verifyEvery: 10 },
    });
    const port = await new Promise<number>((resolve, reject) => {
      worker.once("error", reject);
      worker.on("message", (message: { type?: string; port?: number }) => {
        if (message.type === "ready") resolve(message.port!);
      });
    });
    return new ReceiverThread(worker, port);
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  private ask<T>(message: Record<string, unknown>): Promise<T> {
    const requestId = this.nextRequest++;
    return new Promise<T>((resolve) => {
      this.waiting.set(requestId, resolve);
      this.worker.postMessage({ ...message, requestId });
    });
  }

  /** Requests of `path` about `referenceId` answer 503 for the next `forMs` milliseconds. */
  async fail(path: string, referenceId: string, forMs: number): Promise<void> {
    await this.ask({ type: "fail", path, referenceId, forMs });
  }

  async verifyWith(path: string, secret: string): Promise<void> {
    await this.ask({ type: "verify", path, secret });
  }

  async count(paths: readonly string[]): Promise<number> {
    return (await this.ask<{ count: number }>({ type: "count", paths })).count;
  }

  summary(paths: readonly string[]): Promise<ReceiverSummary> {
    return this.ask<ReceiverSummary>({ type: "summary", paths });
  }

  async records(paths: readonly string[]): Promise<ReceivedRecord[]> {
    return (await this.ask<{ records: ReceivedRecord[] }>({ type: "records", paths })).records;
  }

  async waitForCount(paths: readonly string[], count: number, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((await this.count(paths)) < count) {
      if (Date.now() > deadline)
        throw new Error(`only ${await this.count(paths)} of ${count} deliveries arrived within ${timeoutMs} ms`);
      await sleep(25);
    }
  }

  async close(): Promise<void> {
    await this.ask({ type: "close" });
    await this.worker.terminate();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Databases and instances

function instanceEnv(url: string, workerOn: boolean, firstDelay = "0s"): Record<string, string> {
  return {
    NODE_ENV: "production",
    WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY,
    LOG_LEVEL: "silent",
    RATE_LIMIT_PER_MINUTE: "off",
    DATABASE_URL: url,
    WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
    WEBHOOK_WORKER: workerOn ? "on" : "off",
    WEBHOOK_RETRY_SCHEDULE: `${firstDelay},5s,5m,30m,2h,5h,10h,10h`,
  };
}

/** A server inside this process (writes through its services). */
export async function startInstance(url: string, workerOn: boolean, firstDelay?: string): Promise<App> {
  const config = loadConfig(instanceEnv(url, workerOn, firstDelay));
  return buildApp({ config, database: await openDatabase(url) });
}

/** A server in its own process, as deployed (`node src/main.ts`), listening on loopback. */
export function startServer(url: string): Promise<ServerProcess> {
  // LOG_LEVEL info: the helper waits for the "listening" line; the worker logs nothing per delivery.
  return startServerProcess({ ...instanceEnv(url, true), LOG_LEVEL: "info" });
}

export async function stopServer(server: ServerProcess): Promise<void> {
  server.child.kill("SIGTERM");
  await server.exited();
}

/** Runs one SQL statement on the database with its own driver (not through any instance). */
export async function execute(kind: Kind, url: string, sql: string): Promise<void> {
  if (kind === "sqlite") {
    const sqlite = new Sqlite(sqliteFilePath(url));
    try {
      sqlite.exec(sql);
    } finally {
      sqlite.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

export function containerNumber(serial: number): string {
  const firstTen = `BNCU${String(serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

/** A new organization with one endpoint per path; the receiver checks signatures with their secrets. */
export async function organizationWithEndpoints(
  app: App,
  receiver: ReceiverThread,
  name: string,
  paths: readonly string[],
): Promise<string> {
  const { organization } = await app.services.organizations.createOrganization(name);
  for (const path of paths) {
    const { secret } = await app.services.webhooks.createEndpoint(organization.id, { url: receiver.url(path) });
    await receiver.verifyWith(path, secret!);
  }
  return organization.id;
}

/** Writes `rate` events per second for `seconds` seconds (one reference each), at most 32 writes in flight. */
async function writePaced(
  app: App,
  organizationId: string,
  label: string,
  rate: number,
  seconds: number,
): Promise<number> {
  const total = rate * seconds;
  const interval = 1_000 / rate;
  const start = performance.now();
  const inFlight = new Set<Promise<unknown>>();
  for (let index = 0; index < total; index++) {
    const wait = start + index * interval - performance.now();
    if (wait > 0) await sleep(wait);
    const write: Promise<unknown> = app.services.references
      .createReference(organizationId, { billOfLading: `BL-${label}-${index}`, carrierCode: "MAEU" })
      .finally(() => inFlight.delete(write));
    inFlight.add(write);
    if (inFlight.size >= 32) await Promise.race(inFlight);
  }
  await Promise.all(inFlight);
  return total;
}

export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export interface Row {
  readonly database: Kind;
  readonly scenario: string;
  readonly deliveries: number;
  readonly perSecond: number | null;
  readonly p50: number | null;
  readonly p99: number | null;
  /** Ratio to the row it is compared with (two instances / one; p99 with a slow endpoint / without). */
  readonly ratio?: number;
  readonly duplicates?: number;
  readonly connections?: number;
}

export function latencyRow(database: Kind, scenario: string, records: readonly ReceivedRecord[]): Row {
  const latencies = records.map((record) => record.receivedAt - record.occurredAt).sort((a, b) => a - b);
  return {
    database,
    scenario,
    deliveries: records.length,
    perSecond: null,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Scenarios

/**
 * Queues the backlog (due in an hour, so nothing is sent yet), starts `instances` server processes, makes the
 * backlog due, and measures the drain from the first arrival to the last.
 */
async function drainRow(kind: Kind, receiver: ReceiverThread, url: string, instances: number): Promise<Row> {
  const label = `${instances}x`;
  const paths = Array.from({ length: ENDPOINTS }, (_, index) => `/${kind}/drain-${label}/${index}`);
  const events = Math.ceil(settings.backlog / ENDPOINTS);
  log(`${kind}: queuing ${events} events × ${ENDPOINTS} endpoints with the worker off`);
  const writer = await startInstance(url, false, "1h");
  try {
    const organizationId = await organizationWithEndpoints(writer, receiver, `bench-drain-${label}`, paths);
    // Bills of lading reporting 100 containers each: one `reference_created` per reference, 101 per transaction.
    let queued = 0;
    for (let parent = 0; queued < events; parent++) {
      const reference = await writer.services.references.createReference(organizationId, {
        billOfLading: `BL-DRAIN-${label}-${parent}`,
        carrierCode: "MAEU",
      });
      queued += 1;
      const children = Math.min(100, events - queued);
      if (children === 0) break;
      await writer.services.references.reportChildren(
        organizationId,
        reference.id,
        Array.from({ length: children }, (_, child) => containerNumber(parent * 100 + child)),
      );
      queued += children;
    }
  } finally {
    await writer.close();
  }
  const servers: ServerProcess[] = [];
  try {
    for (let index = 0; index < instances; index++) servers.push(await startServer(url));
    const before = await receiver.summary(paths);
    log(`${kind}: ${instances} instance(s) draining ${settings.backlog} deliveries (load ${fmtLoad()})`);
    // PostgreSQL's statistics still say every delivery is due in an hour: no production path moves due times
    // backwards, least of all 20,000 at once, so they would describe a table that never exists. Planned on them,
    // each claim reads and sorts the whole backlog (20–54 ms a claim instead of 1–11, EXPLAIN ANALYZE during a drain). The same transaction
    // refreshes them, as autovacuum would have had the time to, so the drain measures the claims production makes.
    const makeDue = `UPDATE "webhook_deliveries" SET "next_attempt_at" = "created_at"`;
    await execute(kind, url, kind === "postgres" ? `${makeDue}; ANALYZE "webhook_deliveries"` : makeDue);
    await receiver.waitForCount(paths, events * ENDPOINTS, 600_000);
    // A duplicate, if there were one, has the time to arrive.
    await sleep(500);
    const after = await receiver.summary(paths);
    const drained = await receiver.records(paths);
    const first = Math.min(...drained.map((record) => record.receivedAt));
    const last = Math.max(...drained.map((record) => record.receivedAt));
    return {
      database: kind,
      scenario: `drain a backlog of ${drained.length}, ${ENDPOINTS} endpoints, ${instances} instance${instances > 1 ? "s" : ""}`,
      deliveries: drained.length,
      perSecond: drained.length / ((last - first) / 1000),
      p50: null,
      p99: null,
      duplicates: after.duplicates,
      connections: after.connections - before.connections,
    };
  } finally {
    for (const server of servers) await stopServer(server);
  }
}

async function benchDatabase(kind: Kind, receiver: ReceiverThread): Promise<Row[]> {
  const rows: Row[] = [];
  const database = await createTestDatabase(kind, "reftrail_bench");
  try {
    // 1. Backlogs drained by one instance, and on PostgreSQL by two.
    const one = await drainRow(kind, receiver, database.url, 1);
    rows.push(one);
    if (kind === "postgres" && settings.instances > 1) {
      const two = await drainRow(kind, receiver, database.url, settings.instances);
      rows.push({ ...two, ratio: two.perSecond! / one.perSecond! });
    }
    // The drained backlog would only slow the steady rows' claims down.
    await execute(kind, database.url, `DELETE FROM "webhook_deliveries"`);

    const app = await startInstance(database.url, true);
    try {
      // 2. Steady writes to ten endpoints.
      const steady = `${settings.rate} events/s for ${settings.seconds} s`;
      log(`${kind}: ${steady} to ${ENDPOINTS} endpoints (load ${fmtLoad()})`);
      const tenPaths = Array.from({ length: ENDPOINTS }, (_, index) => `/${kind}/ten/${index}`);
      const ten = await organizationWithEndpoints(app, receiver, "bench-ten", tenPaths);
      const writtenTen = await writePaced(app, ten, `${kind}-ten`, settings.rate, settings.seconds);
      await receiver.waitForCount(tenPaths, writtenTen * ENDPOINTS, 120_000);
      const tenRow = latencyRow(kind, `${steady}, ${ENDPOINTS} endpoints`, await receiver.records(tenPaths));
      rows.push({ ...tenRow, duplicates: (await receiver.summary(tenPaths)).duplicates });

      // 3. The same with one endpoint answering after 5 s: the nine others should not notice.
      log(`${kind}: ${steady} to ${ENDPOINTS} endpoints, one answering after ${settings.slowMs} ms`);
      const slowPaths = Array.from({ length: ENDPOINTS }, (_, index) => `/${kind}/slow/${index}`);
      const fastPaths = slowPaths.filter((path) => path !== slowPathOf(kind));
      const mixed = await organizationWithEndpoints(app, receiver, "bench-slow", slowPaths);
      const writtenMixed = await writePaced(app, mixed, `${kind}-slow`, settings.rate, settings.seconds);
      await receiver.waitForCount(fastPaths, writtenMixed * (ENDPOINTS - 1), 120_000);
      const fastRow = latencyRow(
        kind,
        `same, ${ENDPOINTS - 1} fast endpoints while the 10th answers after ${settings.slowMs / 1000} s (p99 ratio)`,
        await receiver.records(fastPaths),
      );
      rows.push({
        ...fastRow,
        ratio: fastRow.p99! / tenRow.p99!,
        duplicates: (await receiver.summary(fastPaths)).duplicates,
      });
      // Requests that reached the slow endpoint by then, and how long after their event they arrived.
      const slowRecords = await receiver.records([slowPathOf(kind)]);
      rows.push(latencyRow(kind, `  requests to the slow endpoint by then (of ${writtenMixed})`, slowRecords));
    } finally {
      await app.close();
    }
  } finally {
    await database.drop();
  }
  return rows;
}

export function formatTable(rows: readonly Row[]): string {
  const headers = [
    "database",
    "scenario",
    "deliveries",
    "deliveries/s",
    "latency p50 (ms)",
    "latency p99 (ms)",
    "ratio",
    "duplicate ids",
    "TCP connections",
  ];
  const optional = (value: number | null | undefined, digits = 0) =>
    value === null || value === undefined ? "" : value.toFixed(digits);
  const cells = rows.map((row) => [
    row.database,
    row.scenario,
    String(row.deliveries),
    optional(row.perSecond),
    optional(row.p50),
    optional(row.p99),
    row.ratio === undefined ? "" : `${row.ratio.toFixed(2)}×`,
    optional(row.duplicates),
    optional(row.connections),
  ]);
  const widths = headers.map((header, column) => Math.max(header.length, ...cells.map((row) => row[column]!.length)));
  const line = (values: string[]) =>
    `| ${values.map((value, column) => (column >= 2 ? value.padStart(widths[column]!) : value.padEnd(widths[column]!))).join(" | ")} |`;
  return [
    line(headers),
    `|${widths.map((width, column) => (column >= 2 ? `${"-".repeat(width + 1)}:` : "-".repeat(width + 2))).join("|")}|`,
    ...cells.map(line),
  ].join("\n");
}

/** Runs the webhook scenarios on each database of BENCH_DATABASES and prints one table. */
export async function runWebhookBench(): Promise<void> {
  const loadAtStart = fmtLoad();
  const receiver = await ReceiverThread.start(settings.databases.map(slowPathOf), settings.slowMs);
  const rows: Row[] = [];
  let signatures: ReceiverSummary;
  try {
    for (const kind of settings.databases) rows.push(...(await benchDatabase(kind, receiver)));
    signatures = await receiver.summary([]);
  } finally {
    await receiver.close();
  }
  process.stdout.write(
    `\nWebhook delivery (receiver on 127.0.0.1 in its own thread, answering at once; latency is event written → ` +
      `delivery received)\n\n${formatTable(rows)}\n\n` +
      `signatures checked with standardwebhooks: ${signatures.verified}, failed: ${signatures.badSignatures}; ` +
      `load average (1/5/15 min) at start ${loadAtStart}, at end ${fmtLoad()}\n\n`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runWebhookBench().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
