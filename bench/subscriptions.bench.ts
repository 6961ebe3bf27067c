/*
 * Live subscriptions under load (SPEC §10): with BENCH_SUBSCRIPTIONS (1,000) subscriptions open on one instance,
 * each filtered to its own reference, a burst of BENCH_SUBSCRIPTION_EVENTS (1,000) events, one per reference,
 * is written through the services BENCH_SUBSCRIPTION_WRITERS (10) at a time, each writer yielding to the event loop
 * between writes as network requests do. Measured:
 *
 * - commit -> receipt: from the moment the transaction of an event committed (the unit of work's after-commit
 *   listeners, in the server process) to the moment the client process parsed the message carrying it. Both are
 *   wall-clock epoch times with sub-millisecond precision on one machine.
 * - events delivered per second: events received by their subscriber, over the time from the start of the burst
 *   to the last receipt.
 * - memory per open subscription: the server process's heap and RSS after a full GC, with the subscriptions
 *   open minus before they were opened, divided by their number. Each subscription has its own WebSocket
 *   connection, so this includes the socket, graphql-ws's state and the subscription's stream. The clients run in
 *   a child process (bench/subscription-clients.mjs), outside this measurement.
 *
 * Scale-out (PostgreSQL): the same with two instances on one database, the second in its own process
 * (bench/subscription-instance.ts): half the subscriptions on each, the burst written half through each, so
 * half the events reach their subscriber through the other instance (LISTEN/NOTIFY).
 *
 * Settings: BENCH_DATABASES (sqlite,postgres), BENCH_SUBSCRIPTIONS, BENCH_SUBSCRIPTION_EVENTS,
 * BENCH_SUBSCRIPTION_WRITERS, BENCH_SUBSCRIPTION_TWO_INSTANCES (1), TEST_DATABASE_URL (PostgreSQL admin connection).
 * Run alone: `node --import tsx bench/subscriptions.bench.ts`.
 */
import { fork, type ChildProcess } from "node:child_process";
import { loadavg } from "node:os";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { buildApp, type App } from "../src/app.ts";
import { loadConfig, type Config } from "../src/config.ts";
import { openDatabase } from "../src/store/database.ts";
import { createTestDatabase } from "../test/support/test-server.ts";
import { benchDatabases, intSetting, BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";
import { inParallel, writeBurst } from "./subscription-burst.ts";

type Kind = "sqlite" | "postgres";

const settings = {
  databases: benchDatabases(),
  subscriptions: intSetting("BENCH_SUBSCRIPTIONS", 1_000, 1),
  events: intSetting("BENCH_SUBSCRIPTION_EVENTS", 1_000, 1),
  writers: intSetting("BENCH_SUBSCRIPTION_WRITERS", 10, 1),
  /** BENCH_SUBSCRIPTION_TWO_INSTANCES=0 leaves out the two-instance row. */
  twoInstances: intSetting("BENCH_SUBSCRIPTION_TWO_INSTANCES", 1, 0) > 0,
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

interface Row {
  readonly kind: Kind;
  readonly instances: number;
  readonly burstMs: number;
  readonly delivered: number;
  readonly deliveredPerSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  /** Measured with one instance only (the second one's memory is in another process). */
  readonly heapPerSubscription: number | null;
  readonly rssPerSubscription: number | null;
  readonly fellBehind: number;
}

/** The next message of `type` from a child process. */
function nextMessage(child: ChildProcess, type: string): Promise<any> {
  return new Promise((resolve) => {
    const listener = (message: any) => {
      if (message?.type !== type) return;
      child.off("message", listener);
      resolve(message);
    };
    child.on("message", listener);
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  await new Promise((resolve) => {
    const kill = setTimeout(() => child.kill(), 10_000);
    child.once("exit", () => resolve(clearTimeout(kill)));
    child.send({ type: "stop" });
  });
}

async function benchDatabase(kind: Kind, instances: 1 | 2): Promise<Row> {
  const label = `${kind}, ${instances} instance${instances > 1 ? "s" : ""}`;
  const database = await createTestDatabase(kind, "reftrail_bench");
  let app: App | undefined;
  const clients = fork(new URL("./subscription-clients.mjs", import.meta.url), {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const second =
    instances === 2
      ? fork(new URL("./subscription-instance.ts", import.meta.url), { stdio: ["ignore", "inherit", "inherit", "ipc"] })
      : undefined;
  try {
    const env = {
      NODE_ENV: "production",
      WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY,
      LOG_LEVEL: "silent",
      RATE_LIMIT_PER_MINUTE: "off",
      METRICS_TOKEN,
      DATABASE_URL: database.url,
    };
    const config: Config = loadConfig(env);
    app = await buildApp({ config, database: await openDatabase(database.url) });
    await app.http.listen({ host: "127.0.0.1", port: 0 });
    const address = app.http.server.address();
    if (!address || typeof address === "string") throw new Error("server did not bind a TCP port");
    const bases = [`http://127.0.0.1:${address.port}`];
    if (second) {
      const started = nextMessage(second, "started");
      second.send({ type: "start", env });
      bases.push(((await started) as { base: string }).base);
    }
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
    log(`${label}: ${referenceIds.length} references created`);

    const before = settledMemory();
    // Subscriptions round robin over the instances.
    for (const [index, base] of bases.entries()) {
      const opened = nextMessage(clients, "opened");
      clients.send({
        type: "open",
        url: `${base.replace(/^http/, "ws")}/graphql`,
        apiKey: apiKey.key,
        referenceIds: referenceIds.filter((_, n) => n % bases.length === index),
        query: SUBSCRIPTION,
      });
      await opened;
    }
    await until(
      async () =>
        (await Promise.all(bases.map((base) => metric(base, "reftrail_subscriptions_open")))).reduce((a, b) => a + b) >=
        settings.subscriptions,
      120_000,
      "the subscriptions to open",
    );
    const after = settledMemory();
    log(`${label}: ${settings.subscriptions} subscriptions open`);

    // The burst: one event per reference (round robin when there are more events than references), written
    // round robin through the instances, the writers split between them. Event n goes to the reference whose
    // subscription is on instance n % instances, and is written through instance (n + 1) % instances when there
    // are two: every event crosses from one instance to the other.
    const received = nextMessage(clients, "received");
    clients.send({ type: "collect", expected: settings.events });
    const shares = bases.map((_, index) =>
      [...Array(settings.events).keys()]
        .filter((n) => (n + 1) % bases.length === index)
        .map((n) => referenceIds[n % referenceIds.length]!),
    );
    const writersPerInstance = Math.max(1, Math.round(settings.writers / bases.length));
    const burstStart = performance.now();
    const burstStartEpoch = epochNow();
    const written = await Promise.all(
      shares.map(async (share, index) => {
        if (index === 0) return writeBurst(services, organization.id, share, writersPerInstance);
        const done = nextMessage(second!, "written");
        second!.send({
          type: "write",
          organizationId: organization.id,
          referenceIds: share,
          writers: writersPerInstance,
        });
        return new Map<string, number>(((await done) as { committed: [string, number][] }).committed);
      }),
    );
    const burstMs = performance.now() - burstStart;
    const committedAt = new Map(written.flatMap((map) => [...map]));
    const timeout = setTimeout(() => clients.send({ type: "report" }), 60_000);
    const { receipts, errors } = (await received) as { receipts: [string, number][]; errors: string[] };
    clearTimeout(timeout);
    if (errors.length > 0) log(`${label}: client errors: ${errors.slice(0, 3).join(" | ")}`);
    const latencies = receipts
      .map(([id, at]) => at - (committedAt.get(id) ?? Number.NaN))
      .filter((ms) => Number.isFinite(ms))
      .sort((a, b) => a - b);
    const lastReceipt = Math.max(...receipts.map(([, at]) => at));
    log(`${label}: ${latencies.length} of ${settings.events} events received`);
    return {
      kind,
      instances,
      burstMs,
      delivered: latencies.length,
      deliveredPerSecond: (receipts.length / (lastReceipt - burstStartEpoch)) * 1000,
      p50: percentile(latencies, 0.5),
      p99: percentile(latencies, 0.99),
      max: latencies.at(-1) ?? Number.NaN,
      heapPerSubscription: second ? null : (after.heap - before.heap) / settings.subscriptions,
      rssPerSubscription: second ? null : (after.rss - before.rss) / settings.subscriptions,
      fellBehind: (
        await Promise.all(bases.map((base) => metric(base, "reftrail_subscription_fell_behind_total")))
      ).reduce((a, b) => a + b),
    };
  } finally {
    clients.send({ type: "stop" });
    await new Promise((resolve) => {
      const kill = setTimeout(() => clients.kill(), 5_000);
      clients.once("exit", () => resolve(clearTimeout(kill)));
    });
    if (second) await stopChild(second);
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
const kib = (bytes: number | null) => (bytes === null ? "—" : `${(bytes / 1024).toFixed(1)} KiB`);
const fmtLoad = (load: number[]) => load.map((value) => value.toFixed(2)).join(" / ");

/** Runs the subscription benchmark on each database of BENCH_DATABASES and prints its table. */
export async function runSubscriptionBench(): Promise<void> {
  const loadAtStart = loadavg();
  const rows: Row[] = [];
  for (const kind of settings.databases) {
    rows.push(await benchDatabase(kind, 1));
    // Scale-out: instances share a database only on PostgreSQL (SQLite is one process's file).
    if (kind === "postgres" && settings.twoInstances) rows.push(await benchDatabase(kind, 2));
  }
  const out = [
    "",
    `## Live subscriptions: ${settings.subscriptions} open (one WebSocket each, each filtered to its own reference); ` +
      `a burst of ${settings.events} events, one per reference, written ${settings.writers} at a time; ` +
      `with two instances, subscriptions and writers are split between them and every event crosses over`,
    "",
    table(
      [
        "database",
        "instances",
        "burst written in",
        "delivered",
        "events/s delivered",
        "commit→receipt p50",
        "p99",
        "max",
        "heap / subscription",
        "RSS / subscription",
        "fell behind",
      ],
      rows.map((row) => [
        row.kind,
        String(row.instances),
        ms(row.burstMs),
        `${row.delivered}/${settings.events}`,
        row.deliveredPerSecond.toFixed(0),
        ms(row.p50),
        ms(row.p99),
        ms(row.max),
        kib(row.heapPerSubscription),
        kib(row.rssPerSubscription),
        String(row.fellBehind),
      ]),
    ),
    "",
    `load average (1/5/15 min) at start ${fmtLoad(loadAtStart)}, at end ${fmtLoad(loadavg())} (2 cores shared with ` +
      `the clients' process: figures are only comparable between runs under similar load)`,
  ];
  console.log(out.join("\n"));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runSubscriptionBench().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
