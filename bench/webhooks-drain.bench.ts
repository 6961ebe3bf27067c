/*
 * One HTTP endpoint's drain seen from outside the server (issue 38), last of `npm run bench`'s webhook part; alone:
 * `node --import tsx bench/webhooks-drain.bench.ts`. Nothing of the server runs in this process, and nothing of
 * src/ is imported: the server is started as an operator starts it and driven through its REST API only.
 *
 *   1. A fresh database (a SQLite file in a temp folder; a `reftrail_bench_<random>` PostgreSQL database), an
 *      organization and its API key made with the command (`node bin/reftrail.mjs org create`, which migrates).
 *   2. The server: `node dist/main.js` (built first when stale, as `npm start` does) in a process of its own,
 *      its settings in its environment: DATABASE_URL, WEBHOOK_SECRET_KEY, NODE_ENV=production, LOG_LEVEL=silent,
 *      HOST=127.0.0.1, a free PORT, and WEBHOOK_ALLOWED_CIDRS=127.0.0.0/8 (production refuses loopback targets
 *      otherwise). Every other setting keeps its default.
 *   3. The receiver in another process (bench/drain-receiver.mjs): plain node:http answering 200, counting
 *      arrivals, verifying every 100th signature with `standardwebhooks`.
 *   4. BENCH_DRAIN_REFERENCES references, then one endpoint registered over REST with a throttle of one delivery
 *      a second (`max_deliveries_per_second: 1`), so that what is queued waits; BENCH_DRAIN_EVENTS extraction
 *      outcomes queued through `POST /v1/ingestions` (500 a request). The few deliveries the throttle lets
 *      through meanwhile warm the server's HTTP client up.
 *   5. Released by `PATCH /v1/webhooks/{id}` with `max_deliveries_per_second: null`; the endpoint is then an
 *      unthrottled endpoint like any other (the update deletes its throttle window).
 *
 * Figures: deliveries per second from the receiver's first arrival after the release to its last, and the
 * server's CPU time (user + system, every thread, from /proc/<pid>/stat) from the release to the last arrival,
 * per delivery; the receiver's own CPU per delivery beside it (it must not be the bottleneck).
 *
 * Settings (environment): BENCH_DATABASES (sqlite,postgres), BENCH_DRAIN_EVENTS (20000), BENCH_DRAIN_REFERENCES
 * (40), BENCH_DRAIN_ROUNDS (1: each round a fresh database and server), BENCH_DRAIN_NODE_ARGS (flags for the
 * server's node, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof` to profile it; default none),
 * TEST_DATABASE_URL (PostgreSQL admin connection).
 */
import { spawnSync } from "node:child_process";
import { loadavg } from "node:os";
import { join } from "node:path";
import {
  cpuMicros,
  createOrganization,
  freePort,
  freshDatabase,
  operatorEnvironment,
  Receiver,
  startServer,
  type Kind,
  type RunningServer,
} from "./drain-processes.ts";
import { benchDatabases, intSetting } from "./settings.ts";

const ROOT = join(import.meta.dirname, "..");
const INGESTION_BATCH = 500;

const settings = {
  databases: benchDatabases(),
  events: intSetting("BENCH_DRAIN_EVENTS", 20_000, INGESTION_BATCH),
  references: intSetting("BENCH_DRAIN_REFERENCES", 40, 1),
  rounds: intSetting("BENCH_DRAIN_ROUNDS", 1, 1),
  nodeArgs: (process.env.BENCH_DRAIN_NODE_ARGS ?? "").split(" ").filter(Boolean),
  adminUrl: process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres",
};

const log = (message: string) => process.stderr.write(`[bench:drain] ${message}\n`);
const fmtLoad = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(" / ");

export interface DrainRow {
  readonly database: Kind;
  readonly deliveries: number;
  readonly perSecond: number;
  /** From the release's answer to the last arrival. */
  readonly releaseToLastSeconds: number;
  readonly serverCpuMicrosPerDelivery: number;
  readonly receiverCpuMicrosPerDelivery: number;
  readonly verified: number;
  readonly badSignatures: number;
  readonly duplicates: number;
  readonly load: string;
}

// ---------------------------------------------------------------------------------------------------------------
// The run

async function call<T>(origin: string, apiKey: string, method: string, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${origin}${path}`, {
    method,
    headers: { "X-API-Key": apiKey, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

/** Queues extraction outcomes over the references until `events` lifecycle events are written; returns their number. */
async function queueEvents(origin: string, apiKey: string, referenceIds: readonly string[]): Promise<number> {
  let written = 0;
  for (let next = 0; written < settings.events;) {
    const items = Array.from({ length: Math.min(INGESTION_BATCH, settings.events - written) }, () => ({
      kind: "extraction",
      reference_id: referenceIds[next++ % referenceIds.length],
      status: "succeeded",
    }));
    const { event_count } = await call<{ event_count: number }>(origin, apiKey, "POST", "/v1/ingestions", { items });
    if (event_count === 0) throw new Error("an ingestion wrote no event");
    written += event_count;
  }
  return written;
}

async function drainOnce(kind: Kind): Promise<DrainRow> {
  const database = await freshDatabase(kind, settings.adminUrl);
  const receiver = await Receiver.start();
  let server: RunningServer | undefined;
  try {
    const env = operatorEnvironment(database.url, await freePort());
    const apiKey = await createOrganization(env);
    const running = (server = await startServer(env, settings.nodeArgs));
    const { origin } = running;
    const referenceIds: string[] = [];
    for (let index = 0; index < settings.references; index++) {
      const created = await call<{ reference: { id: string } }>(origin, apiKey, "POST", "/v1/references", {
        bill_of_lading: `DRAIN-${index}`,
        carrier_code: "MAEU",
      });
      referenceIds.push(created.reference.id);
    }
    const endpoint = await call<{ id: string; secret: string }>(origin, apiKey, "POST", "/v1/webhooks", {
      url: receiver.url,
      description: "drain bench",
      max_deliveries_per_second: 1,
    });
    receiver.verifyWith(endpoint.secret);
    log(`${kind}: queuing ${settings.events} events (load ${fmtLoad()})`);
    const total = await queueEvents(origin, apiKey, referenceIds);
    const before = await receiver.mark();
    const load = fmtLoad();
    log(`${kind}: ${before} delivered while held; releasing ${total - before} (load ${load})`);
    const serverCpu = cpuMicros(running.pid);
    const receiverCpu = cpuMicros(receiver.pid);
    await call(origin, apiKey, "PATCH", `/v1/webhooks/${endpoint.id}`, { max_deliveries_per_second: null });
    const released = performance.now();
    const summary = await receiver.reached(total);
    const releaseToLastSeconds = (performance.now() - released) / 1000;
    const drained = summary.sinceMark;
    const row: DrainRow = {
      database: kind,
      deliveries: drained,
      perSecond: (drained - 1) / (summary.drainMs / 1000),
      releaseToLastSeconds,
      serverCpuMicrosPerDelivery: (cpuMicros(running.pid) - serverCpu) / drained,
      receiverCpuMicrosPerDelivery: (cpuMicros(receiver.pid) - receiverCpu) / drained,
      verified: summary.verified,
      badSignatures: summary.badSignatures,
      duplicates: summary.duplicates,
      load,
    };
    const sinceSpawn = (at: number) => ((at - running.spawnedAt) / 1000).toFixed(1);
    log(
      `${kind}: ${drained} in ${releaseToLastSeconds.toFixed(1)} s, ${row.perSecond.toFixed(0)}/s, server ` +
        `${row.serverCpuMicrosPerDelivery.toFixed(0)} µs per delivery (load ${fmtLoad()}); released ` +
        `${sinceSpawn(released)} s after the server was spawned, last arrival at ${sinceSpawn(performance.now())} s`,
    );
    return row;
  } finally {
    await server?.stop();
    await receiver.close();
    await database.drop();
  }
}

function formatRows(rows: readonly DrainRow[]): string {
  const header =
    "| database | deliveries | deliveries/s | release → last s | server CPU µs per delivery | receiver CPU µs per delivery | signatures verified (bad) | duplicates | load average (1/5/15) |";
  const lines = rows.map(
    (row) =>
      `| ${row.database} | ${row.deliveries} | ${row.perSecond.toFixed(0)} | ${row.releaseToLastSeconds.toFixed(1)} | ` +
      `${row.serverCpuMicrosPerDelivery.toFixed(0)} | ${row.receiverCpuMicrosPerDelivery.toFixed(0)} | ` +
      `${row.verified} (${row.badSignatures}) | ${row.duplicates} | ${row.load} |`,
  );
  return [header, "|---|---:|---:|---:|---:|---:|---:|---:|---|", ...lines].join("\n");
}

/** Builds the server when stale (as `npm start` does), then runs the rounds on each database and prints a table. */
export async function runWebhookDrainBench(): Promise<DrainRow[]> {
  const build = spawnSync(process.execPath, ["scripts/build-if-stale.mjs"], { cwd: ROOT, stdio: "inherit" });
  if (build.status !== 0) throw new Error("the build failed");
  const loadAtStart = fmtLoad();
  const rows: DrainRow[] = [];
  for (let round = 0; round < settings.rounds; round++) {
    for (const kind of settings.databases) rows.push(await drainOnce(kind));
  }
  process.stdout.write(
    `\nOne HTTP endpoint's drain, black box: \`node dist/main.js\` in its own process, the receiver in another\n\n` +
      `${formatRows(rows)}\n\nload average (1/5/15 min) at start ${loadAtStart}, at end ${fmtLoad()}\n\n`,
  );
  return rows;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runWebhookDrainBench().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
