/*
 * Fair shares of the delivery worker, part of `npm run bench`'s webhook part (after bench/webhooks-ordering.bench.ts;
 * alone: `node --import tsx bench/webhooks-fairness.bench.ts`). Same receiver thread, answering at once. One
 * instance in this process, which writes the small organization's events itself (its commits wake its worker).
 *
 *   alone        one endpoint drains BENCH_FAIR_BACKLOG (30,000) deliveries by itself: deliveries/s (must not fall
 *                with fair claims; goal on SQLite ≥ 2,000/s)
 *   quiet        a small organization's endpoint, one event every 100 ms with nothing else queued: latency
 *   beside bulk  the same while a big organization's BENCH_FAIR_BACKLOG deliveries (events × 3 endpoints) drain:
 *                the small one's latency (p99 ratio to quiet), and the big one's deliveries/s
 *   beside held  the same while one ordered endpoint's failing reference holds BENCH_FAIR_HELD (20,000) deliveries
 *                back (all due): the small one's latency (p50 ratio to quiet)
 *   beside silent the same while another organization's six endpoints accept the connection and never answer
 *                (issue 49.1), each with BENCH_FAIR_SILENT (60) deliveries due: every attempt holds its slot until
 *                WEBHOOK_TIMEOUT (15 s). The small one's latency (p99 ratio to quiet; goal p50 ≤ 200 ms, none > 1 s)
 */
import { createServer, type Server, type Socket } from "node:net";
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
  type Row,
} from "./webhooks.bench.ts";

const settings = {
  databases: benchDatabases(),
  backlog: intSetting("BENCH_FAIR_BACKLOG", 30_000, 300),
  held: intSetting("BENCH_FAIR_HELD", 20_000, 1),
  silent: intSetting("BENCH_FAIR_SILENT", 60, 1),
};

/** A receiver that accepts every connection and never answers (closed with `close`). */
async function silentReceiver(): Promise<{ url: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  if (!address || typeof address === "string") throw new Error("the silent receiver did not bind a port");
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () =>
      new Promise((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

const SMALL_INTERVAL_MS = 100;

/** Queues `deliveries` due in an hour: events of one organization (101 per transaction) to all its endpoints. */
async function queue(app: App, organizationId: string, label: string, events: number): Promise<void> {
  for (let parent = 0, queued = 0; queued < events; parent++) {
    const reference = await app.services.references.createReference(organizationId, {
      billOfLading: `BL-${label}-${parent}`,
      carrierCode: "MAEU",
    });
    queued += 1;
    const children = Math.min(100, events - queued);
    if (children > 0)
      await app.services.references.reportChildren(
        organizationId,
        reference.id,
        Array.from({ length: children }, (_, child) => containerNumber(700_000 + parent * 100 + child)),
      );
    queued += children;
  }
}

const makeDue = (kind: Kind, url: string, organizationId: string) =>
  execute(
    kind,
    url,
    `UPDATE "webhook_deliveries" SET "next_attempt_at" = "created_at" WHERE "organization_id" = '${organizationId}'` +
      (kind === "postgres" ? `; ANALYZE "webhook_deliveries"` : ""),
  );

/** The small organization writes one event every 100 ms while `busy` says so (at least `minimum` events). */
async function smallEvents(app: App, organizationId: string, label: string, busy: () => boolean, minimum: number) {
  let written = 0;
  while (busy() || written < minimum) {
    await app.services.references.createReference(organizationId, {
      billOfLading: `BL-SMALL-${label}-${written}`,
      carrierCode: "MAEU",
    });
    written += 1;
    await sleep(SMALL_INTERVAL_MS);
  }
  return written;
}

async function fairRows(kind: Kind, receiver: ReceiverThread, url: string): Promise<Row[]> {
  const rows: Row[] = [];
  // The writer queues with the worker off, due in an hour; the sender's instance writes the small events.
  const writer = await startInstance(url, false, "1h");
  const ids: Record<string, string> = {};
  const alonePath = `/${kind}/fair/alone`;
  const bigPaths = [0, 1, 2].map((index) => `/${kind}/fair/big/${index}`);
  const heldPath = `/${kind}/fair/held`;
  try {
    ids.alone = await organizationWithEndpoints(writer, receiver, "bench-fair-alone", [alonePath]);
    ids.big = await organizationWithEndpoints(writer, receiver, "bench-fair-big", bigPaths);
    log(`${kind}: queuing ${settings.backlog} deliveries to one endpoint and ${settings.backlog} to three`);
    await queue(writer, ids.alone, `ALONE-${kind}`, settings.backlog);
    await queue(writer, ids.big, `BIG-${kind}`, Math.ceil(settings.backlog / bigPaths.length));
    // The held backlog: one ordered reference, its first delivery failing, the others behind it.
    const { organization } = await writer.services.organizations.createOrganization("bench-fair-held");
    ids.held = organization.id;
    const { secret } = await writer.services.webhooks.createEndpoint(ids.held, {
      url: receiver.url(heldPath),
      ordering: "reference",
    });
    await receiver.verifyWith(heldPath, secret!);
  } finally {
    await writer.close();
  }
  const app = await startInstance(url, true);
  try {
    const small = await organizationWithEndpoints(app, receiver, "bench-fair-small", [`/${kind}/fair/small`]);
    const smallPath = `/${kind}/fair/small`;
    let smallSeen = 0;
    const smallRow = async (tag: string, scenario: string, busy: () => boolean, minimum = 30) => {
      const written = await smallEvents(app, small, `${kind}-${tag}`, busy, minimum);
      await receiver.waitForCount([smallPath], smallSeen + written, 60_000);
      const records = (await receiver.records([smallPath])).slice(smallSeen);
      smallSeen += records.length;
      return latencyRow(kind, scenario, records);
    };

    log(`${kind}: one endpoint alone drains ${settings.backlog} (load ${fmtLoad()})`);
    await makeDue(kind, url, ids.alone!);
    await receiver.waitForCount([alonePath], settings.backlog, 600_000);
    const alone = await receiver.records([alonePath]);
    const times = alone.map((record) => record.receivedAt);
    rows.push({
      database: kind,
      scenario: `one endpoint alone drains ${alone.length}`,
      deliveries: alone.length,
      perSecond: alone.length / ((Math.max(...times) - Math.min(...times)) / 1000),
      p50: null,
      p99: null,
    });

    log(`${kind}: the small organization alone (load ${fmtLoad()})`);
    const quiet = await smallRow("QUIET", "small organization, 1 event / 100 ms, quiet", () => false);
    rows.push(quiet);

    log(`${kind}: the small organization beside a drain of ${settings.backlog} (load ${fmtLoad()})`);
    const bigTotal = Math.ceil(settings.backlog / bigPaths.length) * bigPaths.length;
    let bigDone = false;
    await makeDue(kind, url, ids.big!);
    const bigDrained = receiver.waitForCount(bigPaths, bigTotal, 600_000).then(() => (bigDone = true));
    const beside = await smallRow(
      "BULK",
      `  same, while another organization drains ${bigTotal} (p99 ratio)`,
      () => !bigDone,
    );
    await bigDrained;
    rows.push({ ...beside, ratio: beside.p99! / quiet.p99! });
    const big = await receiver.records(bigPaths);
    const bigTimes = big.map((record) => record.receivedAt);
    rows.push({
      database: kind,
      scenario: `  the other organization's ${big.length}, 3 endpoints, meanwhile`,
      deliveries: big.length,
      perSecond: big.length / ((Math.max(...bigTimes) - Math.min(...bigTimes)) / 1000),
      p50: null,
      p99: null,
    });

    log(`${kind}: the small organization beside ${settings.held} held deliveries (load ${fmtLoad()})`);
    const reference = await app.services.references.createReference(ids.held!, {
      billOfLading: `BL-HELD-${kind}`,
      carrierCode: "MAEU",
    });
    await receiver.fail(heldPath, reference.id, 3_600_000);
    // The rows behind the failing head, written at once (each a later event of the same reference).
    await execute(
      kind,
      url,
      `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${settings.held})
       INSERT INTO "webhook_deliveries" ("id", "organization_id", "endpoint_id", "event_id", "event_type", "body",
         "status", "attempt_count", "next_attempt_at", "created_at", "updated_at", "ordering_key", "event_occurred_at",
         "attempts_since_queued")
       SELECT d."id" || '-' || CAST(100000 + n.i AS TEXT), d."organization_id", d."endpoint_id",
         d."event_id" || '-' || CAST(100000 + n.i AS TEXT), d."event_type", d."body", 'pending', 0, d."created_at",
         d."created_at", d."created_at", d."ordering_key", d."event_occurred_at", 0
       FROM "webhook_deliveries" d CROSS JOIN n WHERE d."organization_id" = '${ids.held}'` +
        (kind === "postgres" ? `; ANALYZE "webhook_deliveries"` : ""),
    );
    await sleep(1_000);
    const held = await smallRow(
      "HELD",
      `  same, beside ${settings.held} deliveries held behind a failing reference`,
      () => false,
    );
    rows.push({ ...held, ratio: held.p50! / quiet.p50! });

    log(`${kind}: the small organization beside six silent endpoints (load ${fmtLoad()})`);
    const silent = await silentReceiver();
    try {
      const { organization: stalling } = await app.services.organizations.createOrganization("bench-fair-silent");
      for (let index = 0; index < 6; index++)
        await app.services.webhooks.createEndpoint(stalling.id, { url: `${silent.url}/silent/${index}` });
      // Written by the sending instance: due at once, and every attempt holds its slot until the timeout.
      await queue(app, stalling.id, `SILENT-${kind}`, settings.silent);
      await sleep(1_000);
      const besideSilent = await smallRow(
        "SILENT",
        `  same, beside 6 endpoints of another organization that never answer (p99 ratio)`,
        () => false,
      );
      rows.push({ ...besideSilent, ratio: besideSilent.p99! / quiet.p99! });
    } finally {
      await silent.close();
    }
  } finally {
    await app.close();
  }
  return rows;
}

/** Runs the rows above on each database of BENCH_DATABASES and prints one table. */
export async function runWebhookFairnessBench(): Promise<void> {
  const loadAtStart = fmtLoad();
  const receiver = await ReceiverThread.start([], 0);
  const rows: Row[] = [];
  try {
    for (const kind of settings.databases) {
      const database = await createTestDatabase(kind, "reftrail_bench");
      try {
        rows.push(...(await fairRows(kind, receiver, database.url)));
      } finally {
        await database.drop();
      }
    }
  } finally {
    await receiver.close();
  }
  process.stdout.write(
    `\nFair shares: one endpoint alone, a small organization beside a big drain and beside held deliveries ` +
      `(latency: event written → delivery received; ratio: p99 beside the drain, p50 beside the held ones, over ` +
      `quiet)\n\n${formatTable(rows)}\n\nload average (1/5/15 min) at start ${loadAtStart}, at end ${fmtLoad()}\n\n`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runWebhookFairnessBench().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
