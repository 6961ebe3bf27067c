/*
 * Ordered delivery, replay and a single endpoint's drain, part of `npm run bench`'s webhook part (after
 * bench/webhooks.bench.ts; alone: `node --import tsx bench/webhooks-ordering.bench.ts`). Same receiver thread.
 *
 *   ordered drain    BENCH_ORDER_REFERENCES (100) references × BENCH_ORDER_EVENTS (20) events queued to two
 *                    endpoints of one organization, one with ordering "reference", one without, then drained by one
 *                    instance: each endpoint's deliveries per second, side by side (goal: ordered ≥ 50 %).
 *   ordered steady   BENCH_WEBHOOK_RATE (100) events/s for BENCH_WEBHOOK_SECONDS (20) s over the 100 references to an
 *                    ordered endpoint: written-to-received latency; then the same while one reference's deliveries
 *                    answer 503 for 5 s: the other 99 references' p99 over the first run's (goal: ≤ 1.2).
 *   replay           BENCH_REPLAY_EVENTS (100,000) events replayed to an endpoint made afterwards, while another
 *                    organization's live events (BENCH_WEBHOOK_RATE/s) go to its own endpoint: replay deliveries/s, live latency p99
 *                    (goal on SQLite: ≥ 2,000/s and p99 ≤ 100 ms); both also logged by tenths of the replay.
 *                    BENCH_ORDER_ROWS=replay runs this row alone; BENCH_REPLAY_PROFILE=<file> writes a CPU
 *                    profile of the replay's second half.
 *   single drain     one unordered endpoint drains a backlog of BENCH_SINGLE_BACKLOG (2,000) deliveries: deliveries/s
 *                    and the CPU per delivery
 *                    of this process in all (worker, SQLite or the PostgreSQL client, and the receiver thread).
 */
import { writeFile } from "node:fs/promises";
import { Session } from "node:inspector";
import type { App } from "../src/app.ts";
import { createTestDatabase } from "../test/support/test-server.ts";
import { benchDatabases, intSetting } from "./settings.ts";
import {
  containerNumber,
  execute,
  fmtLoad,
  formatTable,
  latencyRow,
  log,
  organizationWithEndpoints,
  ReceiverThread,
  sleep,
  startInstance,
  type Kind,
  type ReceivedRecord,
  type Row,
} from "./webhooks.bench.ts";

const settings = {
  databases: benchDatabases(),
  references: intSetting("BENCH_ORDER_REFERENCES", 100, 2),
  eventsPerReference: intSetting("BENCH_ORDER_EVENTS", 20, 1),
  // 2,000 deliveries per steady row: its p99 is then the 20th slowest, where 200 made it the 2nd and a single
  // slow answer moved the failing row's ratio from 0.2× to 1.6× between runs.
  rate: intSetting("BENCH_WEBHOOK_RATE", 100, 1),
  seconds: intSetting("BENCH_WEBHOOK_SECONDS", 20, 1),
  replayEvents: intSetting("BENCH_REPLAY_EVENTS", 100_000, 100),
  singleBacklog: intSetting("BENCH_SINGLE_BACKLOG", 2_000, 1),
  /** BENCH_REPLAY_PROFILE: a file to write a CPU profile of the replay's second half to (.cpuprofile). */
  replayProfile: process.env.BENCH_REPLAY_PROFILE,
  /** BENCH_ORDER_ROWS: which rows run (single, ordered, steady, replay); default all. */
  rows: new Set((process.env.BENCH_ORDER_ROWS ?? "single,ordered,steady,replay").split(",").map((row) => row.trim())),
};

/** Creates `count` references of the organization (one `reference_created` each); returns their ids. */
async function references(app: App, organizationId: string, label: string, count: number): Promise<string[]> {
  const ids: string[] = [];
  for (let index = 0; index < count; index++)
    ids.push(
      (
        await app.services.references.createReference(organizationId, {
          billOfLading: `BL-${label}-${index}`,
          carrierCode: "MAEU",
        })
      ).id,
    );
  return ids;
}

const outcome = (index: number) =>
  index % 2 === 0 ? { status: "succeeded" } : { status: "failed", error: { code: "X", message: "bench" } };

/** Per-path rate from the first arrival to the last. */
function rateOf(records: readonly { receivedAt: number }[]): number {
  const times = records.map((record) => record.receivedAt);
  return records.length / ((Math.max(...times) - Math.min(...times)) / 1000);
}

async function orderedDrain(kind: Kind, receiver: ReceiverThread, url: string): Promise<Row[]> {
  const paths = [`/${kind}/order-drain/ordered`, `/${kind}/order-drain/unordered`];
  const writer = await startInstance(url, false, "1h");
  let total: number;
  try {
    const { organization } = await writer.services.organizations.createOrganization("bench-order-drain");
    for (const [index, path] of paths.entries()) {
      const { secret } = await writer.services.webhooks.createEndpoint(organization.id, {
        url: receiver.url(path),
        ordering: index === 0 ? "reference" : "none",
      });
      await receiver.verifyWith(path, secret!);
    }
    const ids = await references(writer, organization.id, `${kind}-drain`, settings.references);
    await Promise.all(
      ids.map(async (id) => {
        for (let index = 1; index < settings.eventsPerReference; index++)
          await writer.services.referenceTracking.recordExtraction(organization.id, id, outcome(index));
      }),
    );
    total = ids.length * settings.eventsPerReference;
  } finally {
    await writer.close();
  }
  const drainer = await startInstance(url, true);
  try {
    log(`${kind}: draining ${total} events to an ordered and an unordered endpoint (load ${fmtLoad()})`);
    await execute(kind, url, `UPDATE "webhook_deliveries" SET "next_attempt_at" = "created_at"`);
    await receiver.waitForCount(paths, total * 2, 600_000);
  } finally {
    await drainer.close();
  }
  const [ordered, unordered] = await Promise.all(paths.map((path) => receiver.records([path])));
  const orderedRate = rateOf(ordered!);
  const unorderedRate = rateOf(unordered!);
  const scenario = `${settings.references} references × ${settings.eventsPerReference} events, drained`;
  return [
    {
      database: kind,
      scenario: `${scenario}: unordered endpoint`,
      deliveries: unordered!.length,
      perSecond: unorderedRate,
      p50: null,
      p99: null,
    },
    {
      database: kind,
      scenario: `${scenario}: ordered endpoint, same run (ratio to unordered)`,
      deliveries: ordered!.length,
      perSecond: orderedRate,
      p50: null,
      p99: null,
      ratio: orderedRate / unorderedRate,
    },
  ];
}

/** Paced events over the references (round robin) to one ordered endpoint; the failing reference is the first. */
async function orderedSteady(kind: Kind, receiver: ReceiverThread, app: App, failing: boolean): Promise<Row> {
  const label = failing ? "failing" : "healthy";
  const path = `/${kind}/order-steady/${label}`;
  const { organization } = await app.services.organizations.createOrganization(`bench-order-${label}`);
  const { secret } = await app.services.webhooks.createEndpoint(organization.id, {
    url: receiver.url(path),
    ordering: "reference",
  });
  await receiver.verifyWith(path, secret!);
  const ids = await references(app, organization.id, `${kind}-${label}`, settings.references);
  await receiver.waitForCount([path], ids.length, 60_000);
  const before = (await receiver.records([path])).length;
  if (failing) await receiver.fail(path, ids[0]!, 5_000);
  const total = settings.rate * settings.seconds;
  const start = performance.now();
  const writes: Promise<unknown>[] = [];
  for (let index = 0; index < total; index++) {
    const wait = start + (index * 1_000) / settings.rate - performance.now();
    if (wait > 0) await sleep(wait);
    writes.push(
      app.services.referenceTracking.recordExtraction(organization.id, ids[index % ids.length]!, outcome(index)),
    );
  }
  await Promise.all(writes);
  await receiver.waitForCount([path], before + total, 120_000);
  const others = (await receiver.records([path])).slice(before).filter((record) => record.referenceId !== ids[0]);
  return latencyRow(
    kind,
    failing
      ? `ordered, ${settings.rate} events/s over ${ids.length} references, one failing 5 s: the other ${ids.length - 1} (p99 ratio)`
      : `ordered, ${settings.rate} events/s over ${ids.length} references for ${settings.seconds} s`,
    others,
  );
}

async function replay(kind: Kind, receiver: ReceiverThread, url: string): Promise<Row[]> {
  const writer = await startInstance(url, false);
  let replayOrganization: string;
  const since = new Date(Date.now() - 1_000).toISOString();
  try {
    const replayOrg = await writer.services.organizations.createOrganization("bench-replay");
    replayOrganization = replayOrg.organization.id;
    log(`${kind}: writing ${settings.replayEvents} events to replay`);
    let written = 0;
    for (let parent = 0; written < settings.replayEvents; parent++) {
      const reference = await writer.services.references.createReference(replayOrg.organization.id, {
        billOfLading: `BL-REPLAY-${kind}-${parent}`,
        carrierCode: "MAEU",
      });
      written += 1;
      const children = Math.min(99, settings.replayEvents - written);
      if (children > 0)
        await writer.services.references.reportChildren(
          replayOrg.organization.id,
          reference.id,
          Array.from({ length: children }, (_, child) => containerNumber(parent * 100 + child)),
        );
      written += children;
    }
  } finally {
    await writer.close();
  }
  const app = await startInstance(url, true);
  try {
    const replayPath = `/${kind}/replay/target`;
    const livePath = `/${kind}/replay/live`;
    const target = await app.services.webhooks.createEndpoint(replayOrganization, { url: receiver.url(replayPath) });
    const live = await organizationWithEndpoints(app, receiver, "bench-replay-live", [livePath]);
    await receiver.verifyWith(replayPath, target.secret!);
    log(`${kind}: replaying ${settings.replayEvents} events with live traffic beside (load ${fmtLoad()})`);
    const count = await app.services.webhookRecovery.replay(replayOrganization, target.endpoint.id, { since });
    // Live events at BENCH_WEBHOOK_RATE per second while the replay runs.
    let writing = true;
    const liveWriter = (async () => {
      for (let index = 0; writing; index++) {
        await app.services.references.createReference(live, {
          billOfLading: `BL-LIVE-${kind}-${index}`,
          carrierCode: "MAEU",
        });
        await sleep(1_000 / settings.rate);
      }
    })();
    if (settings.replayProfile) {
      await receiver.waitForCount([replayPath], Math.floor(count / 2), 900_000);
      await profileUntil(settings.replayProfile, () => receiver.waitForCount([replayPath], count, 900_000));
    } else await receiver.waitForCount([replayPath], count, 900_000);
    writing = false;
    await liveWriter;
    const replayed = await receiver.records([replayPath]);
    const lastReplayed = Math.max(...replayed.map((record) => record.receivedAt));
    const duringReplay = (await receiver.records([livePath])).filter((record) => record.receivedAt <= lastReplayed);
    logTenths(kind, replayed, duringReplay);
    return [
      {
        database: kind,
        scenario: `replay of ${count} events to an endpoint made afterwards`,
        deliveries: replayed.length,
        perSecond: rateOf(replayed),
        p50: null,
        p99: null,
        duplicates: (await receiver.summary([replayPath])).duplicates,
      },
      latencyRow(kind, `  live events of another organization meanwhile (${settings.rate}/s)`, duringReplay),
    ];
  } finally {
    await app.close();
  }
}

/** Logs the replay's rate and the live deliveries' p99 in each tenth of the replay (by arrival). */
function logTenths(kind: Kind, replayed: readonly ReceivedRecord[], live: readonly ReceivedRecord[]): void {
  const times = replayed.map((record) => record.receivedAt).sort((a, b) => a - b);
  const parts: string[] = [];
  for (let tenth = 0; tenth < 10; tenth++) {
    const from = times[Math.floor((tenth * times.length) / 10)]!;
    const to = times[Math.floor(((tenth + 1) * times.length) / 10) - 1]!;
    const rate = Math.round(times.length / 10 / ((to - from) / 1000));
    const liveRow = latencyRow(
      kind,
      "",
      live.filter((record) => record.receivedAt >= from && record.receivedAt <= to),
    );
    parts.push(`${rate}/s p99 ${liveRow.p99} ms`);
  }
  log(`${kind}: replay by tenths (rate, live p99): ${parts.join(" | ")} (load ${fmtLoad()})`);
}

/** Records a CPU profile of this process (the main thread) while `during` runs. */
async function profileUntil(file: string, during: () => Promise<void>): Promise<void> {
  const session = new Session();
  session.connect();
  const post = (method: string) =>
    new Promise<any>((resolve, reject) =>
      session.post(method, (error, result) => (error ? reject(error) : resolve(result))),
    );
  await post("Profiler.enable");
  await post("Profiler.start");
  try {
    await during();
  } finally {
    const { profile } = await post("Profiler.stop");
    await writeFile(file, JSON.stringify(profile));
    session.disconnect();
  }
}

async function singleDrain(kind: Kind, receiver: ReceiverThread, url: string): Promise<Row> {
  const path = `/${kind}/single-drain`;
  const writer = await startInstance(url, false, "1h");
  try {
    const organizationId = await organizationWithEndpoints(writer, receiver, "bench-single", [path]);
    for (let parent = 0, queued = 0; queued < settings.singleBacklog; parent++) {
      const reference = await writer.services.references.createReference(organizationId, {
        billOfLading: `BL-SINGLE-${kind}-${parent}`,
        carrierCode: "MAEU",
      });
      queued += 1;
      const children = Math.min(99, settings.singleBacklog - queued);
      if (children > 0)
        await writer.services.references.reportChildren(
          organizationId,
          reference.id,
          Array.from({ length: children }, (_, child) => containerNumber(500_000 + parent * 100 + child)),
        );
      queued += children;
    }
  } finally {
    await writer.close();
  }
  const drainer = await startInstance(url, true);
  try {
    await sleep(500);
    const cpuBefore = process.cpuUsage();
    await execute(
      kind,
      url,
      `UPDATE "webhook_deliveries" SET "next_attempt_at" = "created_at" WHERE "status" = 'pending'`,
    );
    await receiver.waitForCount([path], settings.singleBacklog, 300_000);
    const used = process.cpuUsage(cpuBefore);
    const cpu = (used.user + used.system) / 1000;
    const records = await receiver.records([path]);
    return {
      database: kind,
      scenario: `one unordered endpoint drains ${settings.singleBacklog} (CPU in all ${Math.round((cpu * 1000) / records.length)} µs/delivery)`,
      deliveries: records.length,
      perSecond: rateOf(records),
      p50: null,
      p99: null,
    };
  } finally {
    await drainer.close();
  }
}

/** Runs the rows above on each database of BENCH_DATABASES and prints one table. */
export async function runWebhookOrderingBench(): Promise<void> {
  const loadAtStart = fmtLoad();
  const receiver = await ReceiverThread.start([], 0);
  const rows: Row[] = [];
  try {
    for (const kind of settings.databases) {
      const database = await createTestDatabase(kind, "reftrail_bench");
      try {
        if (settings.rows.has("single")) rows.push(await singleDrain(kind, receiver, database.url));
        await execute(kind, database.url, `DELETE FROM "webhook_deliveries"`);
        if (settings.rows.has("ordered")) rows.push(...(await orderedDrain(kind, receiver, database.url)));
        await execute(kind, database.url, `DELETE FROM "webhook_deliveries"`);
        if (settings.rows.has("steady")) {
          const app = await startInstance(database.url, true);
          try {
            log(`${kind}: ordered steady rows (load ${fmtLoad()})`);
            const healthy = await orderedSteady(kind, receiver, app, false);
            const failing = await orderedSteady(kind, receiver, app, true);
            rows.push(healthy, { ...failing, ratio: failing.p99! / healthy.p99! });
          } finally {
            await app.close();
          }
        }
        await execute(kind, database.url, `DELETE FROM "webhook_deliveries"`);
        if (settings.rows.has("replay")) rows.push(...(await replay(kind, receiver, database.url)));
      } finally {
        await database.drop();
      }
    }
  } finally {
    await receiver.close();
  }
  process.stdout.write(
    `\nOrdered delivery, replay and a single endpoint's drain (same receiver)\n\n${formatTable(rows)}\n\n` +
      `load average (1/5/15 min) at start ${loadAtStart}, at end ${fmtLoad()}\n\n`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runWebhookOrderingBench().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
