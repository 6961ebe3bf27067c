/*
 * The webhook part of `npm run bench` (wired in by bench/run.ts): how fast one instance delivers, and how long
 * an event takes from being written to being received, on SQLite and PostgreSQL, against a receiver on
 * 127.0.0.1 that runs in its own thread (bench/webhook-receiver.worker.mjs) and answers at once.
 *
 *   backlog      BENCH_WEBHOOK_BACKLOG events are queued for one endpoint while the worker is off; then an
 *                instance starts and drains them: deliveries per second.
 *   steady       BENCH_WEBHOOK_RATE events per second for BENCH_WEBHOOK_SECONDS seconds to one endpoint, then
 *                to ten endpoints: written-to-received latency (the body's `occurred_at` to the arrival).
 *   one slow     the same to ten endpoints of which one answers after BENCH_WEBHOOK_SLOW_MS (5 s): the
 *                latency of the nine others, which should match the ten-endpoint row above.
 *
 * Settings (environment): BENCH_DATABASES (sqlite,postgres), BENCH_WEBHOOK_BACKLOG (2000), BENCH_WEBHOOK_RATE
 * (20), BENCH_WEBHOOK_SECONDS (10), BENCH_WEBHOOK_SLOW_MS (5000), TEST_DATABASE_URL (PostgreSQL admin
 * connection). The worker runs with its defaults (50 requests in flight, 10 per endpoint, 15 s timeout).
 * Everything it creates (temp SQLite files, `reftrail_bench_webhooks_*` databases) is removed at the end.
 */
import { Worker } from "node:worker_threads";
import { buildApp, type App } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { openDatabase } from "../src/store/database.ts";
import { createTestDatabase } from "../test/support/test-server.ts";
import { benchDatabases, intSetting, BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";

type Kind = "sqlite" | "postgres";

const settings = {
  databases: benchDatabases(),
  backlog: intSetting("BENCH_WEBHOOK_BACKLOG", 2_000, 1),
  rate: intSetting("BENCH_WEBHOOK_RATE", 20, 1),
  seconds: intSetting("BENCH_WEBHOOK_SECONDS", 10, 1),
  slowMs: intSetting("BENCH_WEBHOOK_SLOW_MS", 5_000, 1),
  adminUrl: process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres",
};

/** Each database's scenarios use their own paths on the one receiver. */
const slowPathOf = (kind: Kind) => `/${kind}/slow/9`;
const log = (message: string) => process.stderr.write(`[bench:webhooks] ${message}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------------------------
// The receiver thread

interface ReceivedRecord {
  readonly path: string;
  readonly occurredAt: number;
  readonly receivedAt: number;
}

class ReceiverThread {
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
      workerData: { slowPaths, slowMs },
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

  async count(paths: readonly string[]): Promise<number> {
    return (await this.ask<{ count: number }>({ type: "count", paths })).count;
  }

  async records(paths: readonly string[]): Promise<ReceivedRecord[]> {
    const wanted = new Set(paths);
    return (await this.ask<{ records: ReceivedRecord[] }>({ type: "records" })).records.filter((record) =>
      wanted.has(record.path),
    );
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

async function startInstance(url: string, workerOn: boolean): Promise<App> {
  const config = loadConfig({
    NODE_ENV: "production",
    WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY,
    LOG_LEVEL: "silent",
    RATE_LIMIT_PER_MINUTE: "off",
    DATABASE_URL: url,
    WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
    WEBHOOK_WORKER: workerOn ? "on" : "off",
  });
  return buildApp({ config, database: await openDatabase(url) });
}

function containerNumber(serial: number): string {
  const firstTen = `BNCU${String(serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

/** A new organization with one endpoint per path. */
async function organizationWithEndpoints(app: App, name: string, urls: readonly string[]): Promise<string> {
  const { organization } = await app.services.organizations.createOrganization(name);
  for (const url of urls) await app.services.webhooks.createEndpoint(organization.id, { url });
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

function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

interface Row {
  readonly database: Kind;
  readonly scenario: string;
  readonly deliveries: number;
  readonly perSecond: number | null;
  readonly p50: number | null;
  readonly p99: number | null;
}

function latencyRow(database: Kind, scenario: string, records: readonly ReceivedRecord[]): Row {
  const latencies = records.map((record) => record.receivedAt - record.occurredAt).sort((a, b) => a - b);
  const span = (Math.max(...records.map((r) => r.receivedAt)) - Math.min(...records.map((r) => r.receivedAt))) / 1000;
  return {
    database,
    scenario,
    deliveries: records.length,
    perSecond: span > 0 ? records.length / span : null,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Scenarios

async function benchDatabase(kind: Kind, receiver: ReceiverThread): Promise<Row[]> {
  const rows: Row[] = [];
  const database = await createTestDatabase(kind, "reftrail_bench");
  try {
    // 1. A backlog queued while no worker runs, then drained by one instance.
    log(`${kind}: queuing ${settings.backlog} deliveries with the worker off`);
    const backlogPath = `/${kind}/backlog`;
    const writer = await startInstance(database.url, false);
    let organizationId: string;
    try {
      organizationId = await organizationWithEndpoints(writer, "bench-backlog", [receiver.url(backlogPath)]);
      // Bills of lading reporting 100 containers each: one `reference_created` per reference, 101 per transaction.
      let queued = 0;
      let serial = 0;
      for (let parent = 0; queued < settings.backlog; parent++) {
        const reference = await writer.services.references.createReference(organizationId, {
          billOfLading: `BL-BACKLOG-${parent}`,
          carrierCode: "MAEU",
        });
        queued += 1;
        const children = Math.min(100, settings.backlog - queued);
        if (children === 0) break;
        await writer.services.references.reportChildren(
          organizationId,
          reference.id,
          Array.from({ length: children }, () => containerNumber(serial++)),
        );
        queued += children;
      }
    } finally {
      await writer.close();
    }
    const app = await startInstance(database.url, true);
    try {
      const queued = await app.services.webhookDeliveries.countPending();
      log(`${kind}: draining ${queued} deliveries`);
      await receiver.waitForCount([backlogPath], queued, 300_000);
      const drained = await receiver.records([backlogPath]);
      const first = Math.min(...drained.map((record) => record.receivedAt));
      const last = Math.max(...drained.map((record) => record.receivedAt));
      rows.push({
        database: kind,
        scenario: "drain a backlog, 1 endpoint",
        deliveries: drained.length,
        perSecond: drained.length / ((last - first) / 1000),
        p50: null,
        p99: null,
      });

      // 2. Steady writes to one endpoint, then to ten.
      const steady = `${settings.rate} events/s for ${settings.seconds} s`;
      log(`${kind}: ${steady} to 1 endpoint`);
      const onePath = `/${kind}/one`;
      const one = await organizationWithEndpoints(app, "bench-one", [receiver.url(onePath)]);
      const written = await writePaced(app, one, `${kind}-one`, settings.rate, settings.seconds);
      await receiver.waitForCount([onePath], written, 120_000);
      rows.push(latencyRow(kind, `${steady}, 1 endpoint`, await receiver.records([onePath])));

      log(`${kind}: ${steady} to 10 endpoints`);
      const tenPaths = Array.from({ length: 10 }, (_, index) => `/${kind}/ten/${index}`);
      const ten = await organizationWithEndpoints(
        app,
        "bench-ten",
        tenPaths.map((path) => receiver.url(path)),
      );
      const writtenTen = await writePaced(app, ten, `${kind}-ten`, settings.rate, settings.seconds);
      await receiver.waitForCount(tenPaths, writtenTen * 10, 120_000);
      rows.push(latencyRow(kind, `${steady}, 10 endpoints`, await receiver.records(tenPaths)));

      // 3. The same with one endpoint answering after 5 s: the nine others should not notice.
      log(`${kind}: ${steady} to 10 endpoints, one answering after ${settings.slowMs} ms`);
      const slowPaths = Array.from({ length: 10 }, (_, index) => `/${kind}/slow/${index}`);
      const fastPaths = slowPaths.filter((path) => path !== slowPathOf(kind));
      const mixed = await organizationWithEndpoints(
        app,
        "bench-slow",
        slowPaths.map((path) => receiver.url(path)),
      );
      const writtenMixed = await writePaced(app, mixed, `${kind}-slow`, settings.rate, settings.seconds);
      await receiver.waitForCount(fastPaths, writtenMixed * 9, 120_000);
      rows.push(
        latencyRow(
          kind,
          `${steady}, 9 of 10 endpoints (the 10th answers after ${settings.slowMs / 1000} s)`,
          await receiver.records(fastPaths),
        ),
      );
      // Requests that reached the slow endpoint by then, and how long after their event they arrived.
      const slowRecords = await receiver.records([slowPathOf(kind)]);
      rows.push({
        ...latencyRow(kind, `  requests to the slow endpoint by then (of ${writtenMixed})`, slowRecords),
        perSecond: null,
      });
    } finally {
      await app.close();
    }
  } finally {
    await database.drop();
  }
  return rows;
}

function formatTable(rows: readonly Row[]): string {
  const headers = ["database", "scenario", "deliveries", "deliveries/s", "latency p50 (ms)", "latency p99 (ms)"];
  const cells = rows.map((row) => [
    row.database,
    row.scenario,
    String(row.deliveries),
    row.perSecond === null ? "" : row.perSecond.toFixed(0),
    row.p50 === null ? "" : row.p50.toFixed(0),
    row.p99 === null ? "" : row.p99.toFixed(0),
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
  const receiver = await ReceiverThread.start(settings.databases.map(slowPathOf), settings.slowMs);
  const rows: Row[] = [];
  try {
    for (const kind of settings.databases) rows.push(...(await benchDatabase(kind, receiver)));
  } finally {
    await receiver.close();
  }
  process.stdout.write(
    `\nWebhook delivery (one instance, receiver on 127.0.0.1 answering at once)\n\n${formatTable(rows)}\n\n`,
  );
}
