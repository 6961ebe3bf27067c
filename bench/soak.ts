/*
 * `npm run soak` (not in CI): the bench's mixed load held for half an hour or more against one real server process
 * (bench/server-child.ts) per database, to see what only time shows: memory or descriptors that grow, latency that
 * drifts, deliveries lost or sent twice. Issue 35; the goals and how to read the table: docs/benchmarks.md.
 *
 * The load, on the data part's seeded organization (2,000 references × 2 of 50 tags × 20 events, bench/data-seed.ts):
 *   reads        open loop at SOAK_READ_RATE per second, a third each of the data part's three reads with random
 *                keys and `Cache-Control: no-cache` (GraphQL reference, REST and GraphQL two-tag pages); by
 *                default half the capacity measured at the start (closed loop, 50 connections, each read alone,
 *                while the writes run)
 *   writes       open loop at SOAK_WRITE_RATE per second into random references: 90 % extraction outcomes, 10 %
 *                reference updates
 *   webhooks     five endpoints on receivers in a thread of the soak (bench/soak-receiver.worker.mjs): every event;
 *                every event with ordering "reference" (order checked per reference); every event, answering 500
 *                to a tenth of the requests; reference updates only; one tag only
 *   subscriptions  SOAK_SUBSCRIPTIONS graphql-ws subscriptions, one per reference (bench/subscription-clients.mjs)
 *   replay       every SOAK_REPLAY_MINUTES, the first endpoint replays the last SOAK_REPLAY_WINDOW_MINUTES
 *   PostgreSQL   every SOAK_TERMINATE_SECONDS, one of the server's database connections is terminated
 *                (pg_terminate_backend)
 * The server runs with its production defaults (issue 50.8): logs at `info` (to a file), the per-minute limit of 600
 * requests a key, the default cost budgets; the load spreads over SOAK_KEYS keys of the organization, as a
 * deployment's clients each hold their own, so that nothing is refused (the table counts any 429).
 * Every few seconds the server's GET /metrics gives RSS, heap used, open descriptors, event-loop delay, the webhook
 * queue. After the load, the soak waits for the deliveries to drain (at most SOAK_DRAIN_SECONDS), then compares
 * what each receiver and subscription got with the events the database holds.
 *
 * Output: per database, a markdown table with one line per SOAK_REPORT_MINUTES, the rows' p50/p99, the endpoints'
 * counts and a verdict per goal (bench/soak-report.ts); every figure as JSON in SOAK_OUTPUT.
 *
 * Settings (environment), with defaults:
 *   SOAK_MINUTES 30, SOAK_DATABASES sqlite,postgres (one after the other), SOAK_READ_RATE (measured),
 *   SOAK_WRITE_RATE 100, SOAK_REPORT_MINUTES 5, SOAK_SAMPLE_SECONDS 5, SOAK_REPLAY_MINUTES 10,
 *   SOAK_REPLAY_WINDOW_MINUTES 1, SOAK_TERMINATE_SECONDS 60 (0: never), SOAK_SUBSCRIPTIONS 50, SOAK_REFERENCES 2000,
 *   SOAK_CAPACITY_SECONDS 5, SOAK_DRAIN_SECONDS 300, SOAK_OUTPUT bench/results-soak.json, SOAK_KEYS 100,
 *   SOAK_LOG bench/results-soak-server (the server's log: `<prefix>-<database>.log`),
 *   TEST_DATABASE_URL (PostgreSQL admin connection).
 * A short check that it all works: SOAK_MINUTES=3 SOAK_REPORT_MINUTES=1 SOAK_REPLAY_MINUTES=1 npm run soak
 */
// First: libraries read NODE_ENV when they load.
import "./production-env.ts";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { setTimeout as setTimeoutPromise } from "node:timers/promises";
import { prepareDatabase, sampleIds } from "./data-path.bench.ts";
import { LoadGenerator, type LoadSpec } from "./load.ts";
import { startReftrailChild, type ServerChild } from "./server-child.ts";
import { BENCH_WEBHOOK_SECRET_KEY, intSetting } from "./settings.ts";
import type { Kind } from "./seed.ts";
import { metricValue, ServerSampler } from "./soak-metrics.ts";
import { SoakReceivers } from "./soak-receiver.ts";
import { formatSoak, type EndpointOutcome, type IntervalRow, type SoakOutcome } from "./soak-report.ts";
import {
  createEndpoints,
  createKeyPool,
  overKeys,
  eventsSince,
  matches,
  readRows,
  replay,
  SOAK_ENDPOINTS,
  SubscriptionClients,
  writeRows,
} from "./soak-setup.ts";
import { OpenLoopTraffic } from "./soak-traffic.ts";
import { terminateOneConnection } from "./soak-terminate.ts";

const settings = {
  minutes: intSetting("SOAK_MINUTES", 30, 1),
  databases: (process.env.SOAK_DATABASES ?? "sqlite,postgres").split(",").map((name) => {
    if (name.trim() !== "sqlite" && name.trim() !== "postgres") throw new Error(`SOAK_DATABASES: unknown "${name}"`);
    return name.trim() as Kind;
  }),
  readRate: process.env.SOAK_READ_RATE ? intSetting("SOAK_READ_RATE", 0, 1) : undefined,
  writeRate: intSetting("SOAK_WRITE_RATE", 100, 1),
  reportMinutes: intSetting("SOAK_REPORT_MINUTES", 5, 1),
  sampleSeconds: intSetting("SOAK_SAMPLE_SECONDS", 5, 1),
  replayMinutes: intSetting("SOAK_REPLAY_MINUTES", 10, 1),
  replayWindowMinutes: intSetting("SOAK_REPLAY_WINDOW_MINUTES", 1, 1),
  terminateSeconds: intSetting("SOAK_TERMINATE_SECONDS", 60),
  subscriptions: intSetting("SOAK_SUBSCRIPTIONS", 50, 1),
  references: intSetting("SOAK_REFERENCES", 2000, 100),
  capacitySeconds: intSetting("SOAK_CAPACITY_SECONDS", 5, 1),
  drainSeconds: intSetting("SOAK_DRAIN_SECONDS", 300, 1),
  output: process.env.SOAK_OUTPUT ?? join(import.meta.dirname, "results-soak.json"),
  /** The server's log, per database: `<prefix>-<database>.log`. */
  logPrefix: process.env.SOAK_LOG ?? join(import.meta.dirname, "results-soak-server"),
  /** API keys the load spreads over (the per-minute limit is 600 a key). */
  keys: intSetting("SOAK_KEYS", 100, 1),
};

/**
 * Retries within a minute, so that the drain after the load sees every event of the failing endpoint (production's
 * schedule waits 5 minutes after the second failure); eight attempts, so a tenth failing never gives one up.
 */
const RETRY_SCHEDULE = "0s,1s,5s,10s,30s,1m,1m,1m";
const METRICS_TOKEN = randomBytes(16).toString("hex");

const log = (message: string) => process.stderr.write(`[soak] ${message}\n`);

/** Ctrl-C ends the run's waits with an error, so that each database's cleanup (server, database) still runs. */
const interrupted = new AbortController();
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => interrupted.abort(new Error(`interrupted (${signal})`)));
}
const sleep = (ms: number) => setTimeoutPromise(Math.max(0, ms), undefined, { signal: interrupted.signal });

async function serverMetric(origin: string, name: string): Promise<number> {
  const response = await fetch(`${origin}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  return metricValue(await response.text(), name);
}

/** Closed-loop req/s of each read alone, combined as the mix's (a third each): the harmonic mean. */
async function measureCapacity(
  specs: Readonly<Record<"reference" | "restPage" | "graphqlPage", Omit<LoadSpec, "connections">>>,
): Promise<number> {
  const loads = new LoadGenerator();
  try {
    let secondsPerRead = 0;
    for (const spec of [specs.reference, specs.restPage, specs.graphqlPage]) {
      const result = await loads.run({
        ...spec,
        connections: 50,
        durationSeconds: settings.capacitySeconds,
        warmupSeconds: 1,
      });
      log(`capacity: ${result.rps.toFixed(0)} req/s (${new URL(spec.url).pathname})`);
      secondsPerRead += 1 / 3 / result.rps;
    }
    return 1 / secondsPerRead;
  } finally {
    await loads.close();
  }
}

async function soakDatabase(kind: Kind): Promise<SoakOutcome> {
  const loadAtStart = loadavg();
  const { database, organizationId, apiKey, seeded } = await prepareDatabase(kind, settings.references, {
    tags: 50,
    eventsPerReference: 20,
  });
  const receivers = await SoakReceivers.start(
    Object.fromEntries(SOAK_ENDPOINTS.map((e) => [e.path, { failRatio: e.failRatio, ordered: e.ordered }])),
  );
  const clients = new SubscriptionClients();
  const reads = new OpenLoopTraffic();
  const writes = new OpenLoopTraffic();
  let server: ServerChild | undefined;
  const pending: Promise<unknown>[] = [];
  const timers: NodeJS.Timeout[] = [];
  try {
    // The server's production defaults (issue 50.8): logs at info, the per-minute limit, the default budgets. Its
    // logs go to a file, as a deployment's go to its collector.
    const logFile = `${settings.logPrefix}-${kind}.log`;
    server = await startReftrailChild(
      database.url,
      {
        BENCH_DEFAULTS: "production",
        LOG_LEVEL: "info",
        WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY,
        METRICS_TOKEN,
        WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
        WEBHOOK_RETRY_SCHEDULE: RETRY_SCHEDULE,
      },
      logFile,
    );
    log(`${kind}: the server logs to ${logFile}`);
    const origin = server.url;
    const keys = await createKeyPool(origin, apiKey, settings.keys);
    const endpoints = await createEndpoints(origin, apiKey, (path) => receivers.url(path));
    const subscribed = sampleIds(seeded.referenceIds, settings.subscriptions);
    await clients.open(origin, apiKey, subscribed);
    for (let waited = 0; (await serverMetric(origin, "reftrail_subscriptions_open")) < subscribed.length; waited++) {
      if (waited > 600) throw new Error("the subscriptions did not open within a minute");
      await sleep(100);
    }
    const { specs: oneKeySpecs, rows: oneKeyReads } = await readRows(origin, apiKey, seeded);
    // Every request of the load goes with one of the pool's keys.
    const overPool = <Spec extends Omit<LoadSpec, "connections">>(spec: Spec): Spec => ({
      ...spec,
      variants: overKeys(spec.variants ?? [{ path: new URL(spec.url).pathname, body: spec.body }], keys),
    });
    const specs = {
      reference: overPool(oneKeySpecs.reference),
      restPage: overPool(oneKeySpecs.restPage),
      graphqlPage: overPool(oneKeySpecs.graphqlPage),
    };
    const readRowList = oneKeyReads.map((row) => ({ ...row, variants: overKeys(row.variants, keys) }));
    const writeRowList = writeRows(apiKey, seeded).map((row) => ({ ...row, variants: overKeys(row.variants, keys) }));
    const writesStartedAt = Date.now();
    await writes.start({ origin, ratePerSecond: settings.writeRate, rows: writeRowList, connections: 32 });
    const capacity = settings.readRate === undefined ? await measureCapacity(specs) : undefined;
    const readRate = settings.readRate ?? Math.max(1, Math.round(capacity! / 2));
    if (capacity !== undefined && !(capacity >= 2)) {
      log(`${kind}: the server answered (almost) no reads while the writes ran: the writes alone saturate it`);
    }
    log(`${kind}: ${readRate} reads/s and ${settings.writeRate} writes/s for ${settings.minutes} minutes`);
    // What happened while capacity was measured is not part of the soak.
    await writes.takeInterval();
    await receivers.takeInterval();

    const startedAt = Date.now();
    const minuteNow = () => Math.round((Date.now() - startedAt) / 6_000) / 10;
    const sampler = new ServerSampler(origin, METRICS_TOKEN, startedAt);
    sampler.start(settings.sampleSeconds);
    await reads.start({ origin, ratePerSecond: readRate, rows: readRowList, connections: 64 });
    const replayed = SOAK_ENDPOINTS.find((e) => e.replayed)!;
    const replays: SoakOutcome["replays"][number][] = [];
    timers.push(
      setInterval(() => {
        const since = new Date(Date.now() - settings.replayWindowMinutes * 60_000);
        const minute = minuteNow();
        pending.push(
          replay(origin, apiKey, endpoints.get(replayed.path)!.id, since).then(
            (answer) => replays.push({ minute, ...answer }),
            (error: unknown) => {
              log(`replay failed: ${String(error)}`);
              replays.push({ minute, status: 0, count: 0 });
            },
          ),
        );
      }, settings.replayMinutes * 60_000),
    );
    const terminated: SoakOutcome["terminated"][number][] = [];
    if (kind === "postgres" && settings.terminateSeconds > 0) {
      const terminate = () => {
        const minute = minuteNow();
        pending.push(
          terminateOneConnection(database.url).then(
            (application) => application !== null && terminated.push({ minute, application }),
            (error: unknown) => log(`terminating a connection failed: ${String(error)}`),
          ),
        );
      };
      // Half a period out of step with the replays, which would otherwise always meet a termination (and often
      // be answered 503, as a request whose connection is cut is).
      const every = settings.terminateSeconds * 1000;
      timers.push(setTimeout(() => timers.push(setInterval(terminate, every)), every / 2));
    }

    const intervals: IntervalRow[] = [];
    for (let from = 0; from < settings.minutes; from += settings.reportMinutes) {
      const to = Math.min(settings.minutes, from + settings.reportMinutes);
      await sleep(startedAt + to * 60_000 - Date.now());
      const last = to >= settings.minutes;
      if (last) timers.forEach(clearInterval);
      // Both loads stop sending at once; the last interval then waits for their answers still in flight.
      const [readStats, writeStats] = await Promise.all(
        last ? [reads.stop(), writes.stop()] : [reads.takeInterval(), writes.takeInterval()],
      );
      const row: IntervalRow = {
        fromMinute: from,
        toMinute: to,
        reads: readStats,
        writes: writeStats,
        webhooks: await receivers.takeInterval(),
        samples: sampler.between(from * 60, to * 60 + (last ? settings.sampleSeconds : 0)),
      };
      intervals.push(row);
      const latest = row.samples.at(-1);
      log(
        `${kind} minutes ${from}–${to}: RSS ${latest?.rssMiB.toFixed(0)} MiB, heap ${latest?.heapUsedMiB.toFixed(0)} ` +
          `MiB, fds ${latest?.openFds}, reads p99 ${row.reads.all?.p99.toFixed(1)} ms, writes p99 ` +
          `${row.writes.all?.p99.toFixed(1)} ms, webhooks p99 ${row.webhooks.steady?.p99.toFixed(0)} ms, ` +
          `queue ${latest?.webhookQueueDepth}`,
      );
    }
    await Promise.allSettled(pending);

    log(`${kind}: draining the deliveries (at most ${settings.drainSeconds} s)`);
    const drainStarted = Date.now();
    const events = await eventsSince(kind, database.url, organizationId, writesStartedAt - 5_000);
    const expected = new Map(
      SOAK_ENDPOINTS.map((e) => [
        e.path,
        events.filter((event) => matches(e, endpoints.get(e.path)!.tagId, event)).map((event) => event.id),
      ]),
    );
    const subscribedIds = new Set(subscribed);
    const expectedLive = events.filter((event) => subscribedIds.has(event.referenceId)).map((event) => event.id);
    const drained = async () => {
      const status = await receivers.status();
      const live = await clients.received();
      return (
        SOAK_ENDPOINTS.every((e) => status[e.path]!.distinct >= expected.get(e.path)!.length) &&
        expectedLive.every((id) => live.receipts.has(id))
      );
    };
    let complete = await drained();
    while (!complete && Date.now() - drainStarted < settings.drainSeconds * 1000) {
      await sleep(1000);
      complete = await drained();
    }
    const drainSeconds = (Date.now() - drainStarted) / 1000;
    // When the drain ran out of time, what is still queued is not lost: the report says how much that is.
    const queuedAtEnd = complete ? 0 : await serverMetric(origin, "reftrail_webhook_queue_depth");
    // Replays that are still going out would count as duplicates only after this: give them the same drain.
    sampler.stop();

    const status = await receivers.status();
    const endpointOutcomes: EndpointOutcome[] = [];
    for (const e of SOAK_ENDPOINTS) {
      endpointOutcomes.push({
        path: e.path,
        expected: expected.get(e.path)!.length,
        replayed: e.replayed ? replays.reduce((sum, r) => sum + r.count, 0) : 0,
        ...status[e.path]!,
        ...(await receivers.check(e.path, expected.get(e.path)!)),
      });
    }
    const live = await clients.received();
    return {
      kind,
      minutes: settings.minutes,
      readRate,
      writeRate: settings.writeRate,
      capacity,
      intervals,
      endpoints: endpointOutcomes,
      subscriptions: {
        expected: expectedLive.length,
        lost: expectedLive.filter((id) => !live.receipts.has(id)).length,
        errors: live.errors,
      },
      replays,
      terminated,
      drainSeconds,
      queuedAtEnd,
      loadAverage: { start: loadAtStart, end: loadavg() },
    };
  } finally {
    timers.forEach(clearInterval);
    await Promise.allSettled(pending);
    await reads.close();
    await writes.close();
    await clients.stop();
    await server?.stop();
    await receivers.close();
    await database.drop();
  }
}

async function main(): Promise<void> {
  const outcomes: SoakOutcome[] = [];
  for (const kind of settings.databases) {
    outcomes.push(await soakDatabase(kind));
    console.log(`\n${formatSoak(outcomes.at(-1)!)}\n`);
    writeFileSync(
      settings.output,
      `${JSON.stringify({ at: new Date().toISOString(), settings, outcomes }, null, 2)}\n`,
    );
  }
  log(`figures written to ${settings.output}`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
