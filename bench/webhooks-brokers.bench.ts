/*
 * Broker destinations beside HTTP, part of `npm run bench`'s webhook part (after bench/webhooks-fairness.bench.ts;
 * alone: `node --import tsx bench/webhooks-brokers.bench.ts`). One instance in this process drains, one after the
 * other and in the same run, BENCH_BROKER_BACKLOG (5,000) deliveries queued for one endpoint of each kind:
 *
 *   http         the receiver thread of bench/webhooks.bench.ts on 127.0.0.1, answering at once
 *   rabbitmq     a topic exchange on the local RabbitMQ (127.0.0.1:5672) with one queue bound, consumed here
 *   nats         a JetStream stream on the local NATS (127.0.0.1:4222) capturing the subject
 *
 * Each row: deliveries per second from the moment the backlog is made due to the last message received (RabbitMQ:
 * consumed; JetStream: stored, read from the stream's state), and the process's CPU time per delivery over that
 * drain (the worker, and for HTTP the receiver thread and for RabbitMQ the consumer, which live in this process).
 * Needs RabbitMQ and NATS running (README "Development").
 */
import type { App } from "../src/app.ts";
import {
  connectNats,
  connectRabbitMq,
  natsStream,
  NATS_URL,
  RABBITMQ_URL,
  rabbitMqReceiver,
  uniqueName,
} from "../test/support/brokers.ts";
import { createTestDatabase } from "../test/support/test-server.ts";
import { benchDatabases, intSetting } from "./settings.ts";
import {
  containerNumber,
  execute,
  fmtLoad,
  log,
  ReceiverThread,
  sleep,
  startInstance,
  type Kind,
} from "./webhooks.bench.ts";

const settings = {
  databases: benchDatabases(),
  backlog: intSetting("BENCH_BROKER_BACKLOG", 5_000, 101),
};

interface BrokerRow {
  readonly database: Kind;
  readonly destination: string;
  readonly deliveries: number;
  readonly perSecond: number;
  readonly cpuMicrosPerDelivery: number;
}

/** Queues `events` deliveries due in an hour for the organization's one endpoint (101 events per transaction). */
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
        Array.from({ length: children }, (_, child) => containerNumber(800_000 + parent * 100 + child)),
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

/** Polls `received()` every 10 ms until it reaches `total` (at most 10 minutes). */
async function until(total: number, received: () => Promise<number> | number): Promise<void> {
  const deadline = Date.now() + 600_000;
  while ((await received()) < total) {
    if (Date.now() > deadline) throw new Error(`the drain took over 10 minutes (${await received()} of ${total})`);
    await sleep(10);
  }
}

/** Makes the organization's backlog due and times the drain until `drained()` resolves. */
async function drain(
  kind: Kind,
  url: string,
  organizationId: string,
  destination: string,
  total: number,
  drained: () => Promise<unknown>,
): Promise<BrokerRow> {
  log(`${kind}: ${destination} drains ${total} (load ${fmtLoad()})`);
  const cpu = process.cpuUsage();
  const started = performance.now();
  await makeDue(kind, url, organizationId);
  await drained();
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  return {
    database: kind,
    destination,
    deliveries: total,
    perSecond: total / seconds,
    cpuMicrosPerDelivery: (used.user + used.system) / total,
  };
}

async function brokerRows(kind: Kind, url: string, receiver: ReceiverThread): Promise<BrokerRow[]> {
  const rabbit = await connectRabbitMq();
  const nats = await connectNats();
  const exchange = await rabbitMqReceiver(rabbit);
  const subject = uniqueName("reftrail.bench").replaceAll("-", "_");
  const stream = await natsStream(nats.manager, subject);
  const httpPath = `/${kind}/brokers/http`;
  const ids: Record<string, string> = {};
  const writer = await startInstance(url, false, "1h");
  try {
    const organization = async (name: string, input: Record<string, unknown>) => {
      const { organization } = await writer.services.organizations.createOrganization(name);
      const { secret } = await writer.services.webhooks.createEndpoint(organization.id, input);
      return { id: organization.id, secret };
    };
    const http = await organization("bench-brokers-http", { url: receiver.url(httpPath) });
    // An HMAC endpoint (the default signing) is created with its secret.
    await receiver.verifyWith(httpPath, http.secret!);
    ids.http = http.id;
    ids.rabbitmq = (
      await organization("bench-brokers-rabbitmq", {
        destination: { kind: "rabbitmq", url: RABBITMQ_URL, exchange: exchange.exchange },
      })
    ).id;
    ids.nats = (
      await organization("bench-brokers-nats", {
        destination: { kind: "nats", url: NATS_URL, subject: `${subject}.events` },
      })
    ).id;
    log(`${kind}: queuing ${settings.backlog} deliveries for each of the three endpoints`);
    for (const [label, id] of Object.entries(ids)) await queue(writer, id, `${label}-${kind}`, settings.backlog);
  } finally {
    await writer.close();
  }
  const app = await startInstance(url, true);
  try {
    const total = settings.backlog;
    return [
      await drain(kind, url, ids.http!, "HTTP endpoint", total, () =>
        receiver.waitForCount([httpPath], total, 600_000),
      ),
      await drain(kind, url, ids.rabbitmq!, "RabbitMQ exchange", total, () =>
        until(total, () => exchange.messages.length),
      ),
      await drain(kind, url, ids.nats!, "NATS JetStream subject", total, () =>
        until(total, async () => (await nats.manager.streams.info(stream.name)).state.messages),
      ),
    ];
  } finally {
    await app.close();
    await exchange.channel.close();
    await stream.delete();
    await rabbit.close();
    await nats.connection.close();
  }
}

function formatRows(rows: readonly BrokerRow[]): string {
  const header = "| database | destination | deliveries | deliveries/s | CPU µs per delivery |";
  const lines = rows.map(
    (row) =>
      `| ${row.database} | ${row.destination} | ${row.deliveries} | ${row.perSecond.toFixed(0)} | ` +
      `${row.cpuMicrosPerDelivery.toFixed(0)} |`,
  );
  return [header, "|---|---|---:|---:|---:|", ...lines].join("\n");
}

/** Runs the rows above on each database of BENCH_DATABASES and prints one table. */
export async function runWebhookBrokersBench(): Promise<void> {
  const loadAtStart = fmtLoad();
  const receiver = await ReceiverThread.start([], 0);
  const rows: BrokerRow[] = [];
  try {
    for (const kind of settings.databases) {
      const database = await createTestDatabase(kind, "reftrail_bench");
      try {
        rows.push(...(await brokerRows(kind, database.url, receiver)));
      } finally {
        await database.drop();
      }
    }
  } finally {
    await receiver.close();
  }
  process.stdout.write(
    `\nBroker destinations beside HTTP: one endpoint of each kind drains its backlog, one after the other, in one ` +
      `instance\n\n${formatRows(rows)}\n\nload average (1/5/15 min) at start ${loadAtStart}, at end ${fmtLoad()}\n\n`,
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runWebhookBrokersBench().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
