/*
 * The feed to poll (SPEC §10, `GET /v1/events?wait=`), long polls on one instance:
 *
 * - at rest: BENCH_POLLS (1,000) long polls (`wait=30`) waiting at once, each filtered to its own reference.
 *   The server's statements are counted over BENCH_POLL_IDLE_SECONDS (5) with no poll open (the baseline: the
 *   webhook worker and the retention job are off, so it is 0), then over as long with the polls waiting. Goal:
 *   no statement while they wait (they wait on the live feed, woken by commit signals, with no safety-net reads).
 * - commit -> answer: then one event for each of BENCH_POLL_ROUNDS (300) of those references, written one after
 *   another through the services while the other polls keep waiting: from the moment the event's transaction
 *   committed (the unit of work's after-commit listeners) to the moment the client had parsed the answer of the
 *   poll waiting for it. Goal: ≤ 50 ms. The clients are undici requests in the bench's own process, so each
 *   answer's parsing shares the event loop with the server (it would otherwise cost a second process's loop).
 *
 * Settings: BENCH_DATABASES (sqlite,postgres), BENCH_POLLS, BENCH_POLL_ROUNDS, BENCH_POLL_IDLE_SECONDS,
 * TEST_DATABASE_URL (PostgreSQL admin connection). Run alone: `node --import tsx bench/event-feed.bench.ts`.
 */
import { loadavg } from "node:os";
import { Agent, request } from "undici";
import { buildApp, type App } from "../src/app.ts";
import { loadConfig } from "../src/config.ts";
import { openDatabase } from "../src/store/database.ts";
import { createTestDatabase } from "../test/support/test-server.ts";
import { benchDatabases, intSetting, BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";

type Kind = "sqlite" | "postgres";

const settings = {
  databases: benchDatabases(),
  polls: intSetting("BENCH_POLLS", 1_000, 1),
  rounds: intSetting("BENCH_POLL_ROUNDS", 300, 1),
  idleSeconds: intSetting("BENCH_POLL_IDLE_SECONDS", 5, 1),
};

const started = performance.now();
const log = (message: string) =>
  console.error(`[bench ${((performance.now() - started) / 1000).toFixed(0).padStart(4)}s] feed: ${message}`);
const epochNow = () => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`feed bench: timed out waiting for ${what}`);
    await sleep(5);
  }
}

function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

interface Row {
  readonly kind: Kind;
  readonly baselineStatements: number;
  readonly idleStatements: number;
  readonly rounds: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

async function measure(kind: Kind): Promise<Row> {
  const database = await createTestDatabase(kind, "reftrail_bench");
  let statements = 0;
  let app: App | undefined;
  // One connection per poll, as 1,000 pollers would have.
  const dispatcher = new Agent({ connections: null, keepAliveTimeout: 60_000 });
  try {
    const config = loadConfig({
      NODE_ENV: "production",
      WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY,
      LOG_LEVEL: "silent",
      RATE_LIMIT_PER_MINUTE: "off",
      DATABASE_URL: database.url,
      WEBHOOK_WORKER: "off",
      RETENTION_PRUNE_INTERVAL: "0",
      FEED_MAX_WAITING_POLLS_PER_ORGANIZATION: String(settings.polls),
    });
    app = await buildApp({
      config,
      database: await openDatabase(database.url, { onQuery: () => statements++ }),
    });
    await app.http.listen({ host: "127.0.0.1", port: 0 });
    const address = app.http.server.address();
    if (!address || typeof address === "string") throw new Error("server did not bind a TCP port");
    const base = `http://127.0.0.1:${address.port}`;
    const services = app.services;
    const { organization, apiKey } = await services.organizations.createOrganization("feed-bench");
    const references: string[] = [];
    for (let i = 0; i < settings.polls; i++) {
      const reference = await services.references.createReference(organization.id, {
        bookingNumber: `BK-FEED-${i}`,
        carrierCode: "MAEU",
      });
      references.push(reference.id);
    }
    // Each poll starts at the end of its reference's log.
    const cursors = await Promise.all(
      references.map(
        async (id) => (await services.eventFeed.readPage(organization.id, { referenceId: id })).nextCursor,
      ),
    );
    const committedAt = new Map<string, number>();
    const stopListening = services.commits.onEventsCommitted((events) => {
      const now = epochNow();
      for (const event of events) committedAt.set(event.referenceId, now);
    });

    log(`${kind}: counting statements for ${settings.idleSeconds} s with no poll open`);
    let from = statements;
    await sleep(settings.idleSeconds * 1_000);
    const baselineStatements = statements - from;

    log(`${kind}: opening ${settings.polls} long polls`);
    const answeredAt = new Map<string, number>();
    const answers = references.map(async (id, index) => {
      const response = await request(
        `${base}/v1/events?reference_id=${id}&wait=30&after=${encodeURIComponent(cursors[index]!)}`,
        { headers: { "x-api-key": apiKey.key }, dispatcher },
      );
      const page = (await response.body.json()) as { data: unknown[] };
      if (page.data.length > 0) answeredAt.set(id, epochNow());
    });
    await until(() => services.eventFeed.waitingPolls === settings.polls, 60_000, `${settings.polls} waiting polls`);
    from = statements;
    await sleep(settings.idleSeconds * 1_000);
    const idleStatements = statements - from;
    log(`${kind}: ${idleStatements} statements in ${settings.idleSeconds} s with the polls waiting`);

    const latencies: number[] = [];
    const rounds = Math.min(settings.rounds, settings.polls);
    for (const id of references.slice(0, rounds)) {
      await services.referenceTracking.recordExtraction(organization.id, id, { status: "succeeded" });
      await until(() => answeredAt.has(id), 10_000, `the answer for ${id}`);
      latencies.push(answeredAt.get(id)! - committedAt.get(id)!);
    }
    stopListening();
    latencies.sort((a, b) => a - b);
    // The polls left answer at shutdown (empty).
    await app.close();
    app = undefined;
    await Promise.allSettled(answers);
    return {
      kind,
      baselineStatements,
      idleStatements,
      rounds,
      p50: percentile(latencies, 0.5),
      p99: percentile(latencies, 0.99),
      max: latencies.at(-1) ?? Number.NaN,
    };
  } finally {
    await app?.close();
    await dispatcher.close();
    await database.drop();
  }
}

const ms = (value: number) => `${value.toFixed(1)} ms`;

export async function runEventFeedBench(): Promise<void> {
  const loadAtStart = loadavg();
  const rows: Row[] = [];
  for (const kind of settings.databases) rows.push(await measure(kind));
  const fmtLoad = (load: number[]) => load.map((value) => value.toFixed(2)).join(" / ");
  const out = [
    `## The feed to poll: ${settings.polls} long polls (wait=30) waiting, each on its own reference; then one ` +
      `event for each of ${settings.rounds} of them, written one after another`,
    "",
    "| database | statements in " +
      `${settings.idleSeconds} s, no poll | statements in ${settings.idleSeconds} s, polls waiting | ` +
      "answers | commit→answer p50 | p99 | max |",
    "|---|--:|--:|--:|--:|--:|--:|",
    ...rows.map(
      (row) =>
        `| ${row.kind} | ${row.baselineStatements} | ${row.idleStatements} | ${row.rounds} | ${ms(row.p50)} | ` +
        `${ms(row.p99)} | ${ms(row.max)} |`,
    ),
    "",
    `load average (1/5/15 min) at start ${fmtLoad(loadAtStart)}, at end ${fmtLoad(loadavg())}`,
  ];
  console.log(out.join("\n"));
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runEventFeedBench().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
