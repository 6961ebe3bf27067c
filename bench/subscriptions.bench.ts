/*
 * Live subscriptions under load (SPEC §10): with BENCH_SUBSCRIPTIONS (1,000) subscriptions open on one instance,
 * each filtered to its own reference, a burst of BENCH_SUBSCRIPTION_EVENTS (1,000) events, one per reference,
 * is written through the services BENCH_SUBSCRIPTION_WRITERS (10) at a time, each writer yielding to the event loop
 * between writes as network requests do. Measured:
 *
 * - commit -> receipt: from the moment the transaction of an event committed (the unit of work's after-commit
 *   listeners, in the server process) to the moment the client process parsed the message carrying it. Both are
 *   wall-clock epoch times with sub-millisecond precision on one machine.
 * - memory per open subscription: the server process's heap and RSS after a full GC, with the subscriptions
 *   open minus before they were opened, divided by their number. Each subscription has its own WebSocket
 *   connection, so this includes the socket, graphql-ws's state and the subscription's stream. The clients run in
 *   a child process (bench/subscription-clients.mjs), outside this measurement.
 *
 * Settings: BENCH_DATABASES (sqlite,postgres), BENCH_SUBSCRIPTIONS, BENCH_SUBSCRIPTION_EVENTS,
 * BENCH_SUBSCRIPTION_WRITERS, TEST_DATABASE_URL (PostgreSQL admin connection).
 * Run alone: `node --import tsx bench/subscriptions.bench.ts`.
 */
import { fork } from "node:child_process";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { buildApp, type App } from "../src/app.ts";
import { loadConfig, type Config } from "../src/config.ts";
import { openDatabase } from "../src/store/database.ts";
import { createTestDatabase } from "../test/support/test-server.ts";
import { benchDatabases, intSetting, BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";

type Kind = "sqlite" | "postgres";

const settings = {
  databases: benchDatabases(),
  subscriptions: intSetting("BENCH_SUBSCRIPTIONS", 1_000, 1),
  events: intSetting("BENCH_SUBSCRIPTION_EVENTS", 1_000, 1),
  writers: intSetting("BENCH_SUBSCRIPTION_WRITERS", 10, 1),
  adminUrl: process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres",
};

const SUBSCRIPTION = `subscription Bench($referenceId: ID) {
  lifecycleEvents(referenceId: $referenceId) { cursor node { id type occurredAt referenceId } }
}`;

const started = performance.now();
const log = (message: string) =>
  console.error(`[bench ${((performance.now() - started) / 1000).toFixed(0).padStart(4)}s] subscriptions: ${message}`);
const epochNow = () => performance.timeOrigin + performance.now();

/** A full garbage collection: `global.gc` when node runs with --expose-gc, else one obtained through V8 flags. */
const collectGarbage: () => void = (() => {
  const exposed = (globalThis as { gc?: () => void }).gc;
  if (exposed) return exposed;
  setFlagsFromString("--expose-gc");
  return runInNewContext("gc") as () => void;
})();

function settledMemory(): { heap: number; rss: number } {
  for (let i = 0; i < 3; i++) collectGarbage();
  const usage = process.memoryUsage();
  return { heap: usage.heapUsed, rss: usage.rss };
}

function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

// Production servers serve /metrics only with a token (or on a port of their own).
const METRICS_TOKEN = "bench-metrics";

async function metric(base: string, name: string): Promise<number> {
  const response = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  if (!response.ok) throw new Error(`subscriptions bench: /metrics answered ${response.status}`);
  const text = await response.text();
  const line = text.split("\n").find((row) => row.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

async function until(condition: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`subscriptions bench: timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Runs `work` over `items`, `concurrency` at a time. */
async function inParallel<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

interface Row {
  readonly kind: Kind;
  readonly burstMs: number;
  readonly delivered: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly heapPerSubscription: number;
  readonly rssPerSubscription: number;
  readonly fellBehind: number;
}

async function benchDatabase(kind: Kind): Promise<Row> {
  const database = await createTestDatabase(kind, "reftrail_bench");
  let app: App | undefined;
  const clients = fork(new URL("./subscription-clients.mjs", import.meta.url), {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  try {
    const config: Config = loadConfig({
      NODE_ENV: "production",
      WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY,
      LOG_LEVEL: "silent",
      RATE_LIMIT_PER_MINUTE: "off",
      METRICS_TOKEN,
      DATABASE_URL: database.url,
    });
    app = await buildApp({ config, database: await openDatabase(database.url) });
    await app.http.listen({ host: "127.0.0.1", port: 0 });
    const address = app.http.server.address();
    if (!address || typeof address === "string") throw new Error("server did not bind a TCP port");
    const base = `http://127.0.0.1:${address.port}`;
    const { services } = app;

    const { organization, apiKey } = await services.organizations.createOrganization("bench");
    const referenceIds: string[] = [];
    await inParallel([...Array(settings.subscriptions).keys()], settings.writers, async (n) => {
      const reference = await services.references.createReference(organization.id, {
        bookingNumber: `BK-BENCH-${n}`,
        carrierCode: "MAEU",
      });
      referenceIds.push(reference.id);
    });
    log(`${kind}: ${referenceIds.length} references created`);

    const before = settledMemory();
    const nextMessage = (type: string) =>
      new Promise<any>((resolve) => {
        const listener = (message: any) => {
          if (message?.type !== type) return;
          clients.off("message", listener);
          resolve(message);
        };
        clients.on("message", listener);
      });
    const opened = nextMessage("opened");
    clients.send({
      type: "open",
      url: `${base.replace(/^http/, "ws")}/graphql`,
      apiKey: apiKey.key,
      referenceIds,
      query: SUBSCRIPTION,
    });
    await opened;
    await until(
      async () => (await metric(base, "reftrail_subscriptions_open")) >= settings.subscriptions,
      120_000,
      "the subscriptions to open",
    );
    const after = settledMemory();
    log(`${kind}: ${settings.subscriptions} subscriptions open`);

    // The burst: one event per reference (round robin when there are more events than references).
    const committedAt = new Map<string, number>();
    const stopListening = services.commits.onEventsCommitted((events) => {
      const at = epochNow();
      for (const event of events) committedAt.set(event.id, at);
    });
    const received = nextMessage("received");
    clients.send({ type: "collect", expected: settings.events });
    const burstStart = performance.now();
    await inParallel([...Array(settings.events).keys()], settings.writers, async (n) => {
      await services.references.recordExtraction(organization.id, referenceIds[n % referenceIds.length]!, {
        status: "succeeded",
      });
      // Requests arrive over the network, between turns of the event loop. Without this, on SQLite (whose driver
      // is synchronous) the writers' promise chains would never yield, and no timer could fire during the burst.
      await new Promise((resolve) => setImmediate(resolve));
    });
    const burstMs = performance.now() - burstStart;
    stopListening();
    const timeout = setTimeout(() => clients.send({ type: "report" }), 60_000);
    const { receipts, errors } = (await received) as { receipts: [string, number][]; errors: string[] };
    clearTimeout(timeout);
    if (errors.length > 0) log(`${kind}: client errors: ${errors.slice(0, 3).join(" | ")}`);
    const latencies = receipts
      .map(([id, at]) => at - (committedAt.get(id) ?? Number.NaN))
      .filter((ms) => Number.isFinite(ms))
      .sort((a, b) => a - b);
    log(`${kind}: ${latencies.length} of ${settings.events} events received`);
    return {
      kind,
      burstMs,
      delivered: latencies.length,
      p50: percentile(latencies, 0.5),
      p99: percentile(latencies, 0.99),
      max: latencies.at(-1) ?? Number.NaN,
      heapPerSubscription: (after.heap - before.heap) / settings.subscriptions,
      rssPerSubscription: (after.rss - before.rss) / settings.subscriptions,
      fellBehind: await metric(base, "reftrail_subscription_fell_behind_total"),
    };
  } finally {
    clients.send({ type: "stop" });
    await new Promise((resolve) => {
      const kill = setTimeout(() => clients.kill(), 5_000);
      clients.once("exit", () => resolve(clearTimeout(kill)));
    });
    await app?.close();
    await database.drop();
  }
}

function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((header, i) => Math.max(header.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) =>
    `| ${cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join(" | ")} |`;
  return [
    line(headers),
    `|${widths.map((w, i) => (i === 0 ? ":" : "-").padEnd(w + 1, "-") + (i === 0 ? "-" : ":")).join("|")}|`,
    ...rows.map(line),
  ].join("\n");
}

const ms = (value: number) => (Number.isFinite(value) ? `${value.toFixed(1)} ms` : "n/a");
const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

/** Runs the subscription benchmark on each database of BENCH_DATABASES and prints its table. */
export async function runSubscriptionBench(): Promise<void> {
  const rows: Row[] = [];
  for (const kind of settings.databases) rows.push(await benchDatabase(kind));
  const out = [
    "",
    `## Live subscriptions: ${settings.subscriptions} open on one instance (one WebSocket each, each filtered to its own reference); ` +
      `a burst of ${settings.events} events, one per reference, written ${settings.writers} at a time`,
    "",
    table(
      [
        "database",
        "burst written in",
        "delivered",
        "commit→receipt p50",
        "p99",
        "max",
        "heap / subscription",
        "RSS / subscription",
        "fell behind",
      ],
      rows.map((row) => [
        row.kind,
        ms(row.burstMs),
        `${row.delivered}/${settings.events}`,
        ms(row.p50),
        ms(row.p99),
        ms(row.max),
        kib(row.heapPerSubscription),
        kib(row.rssPerSubscription),
        String(row.fellBehind),
      ]),
    ),
  ];
  console.log(out.join("\n"));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runSubscriptionBench().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
