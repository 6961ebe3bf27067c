import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import amqp, { type Channel, type ChannelModel } from "amqplib";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { jetstreamManager, type JetStreamManager } from "@nats-io/jetstream";

/*
 * The real message brokers of the broker-destination tests: RabbitMQ on 127.0.0.1:5672 (guest/guest) and NATS
 * with JetStream on 127.0.0.1:4222, started on every machine and by .ci/run (README, first screen). A test that
 * needs one fails at once with a line saying which is missing and how to start it. Every test uses exchanges,
 * queues, streams and subjects of its own (random names), so tests running in parallel never share one.
 */

export const RABBITMQ_URL = process.env.TEST_RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672/";
export const NATS_URL = process.env.TEST_NATS_URL ?? "nats://127.0.0.1:4222";

/** A unique name for this test's broker objects. */
export const uniqueName = (prefix: string) => `${prefix}-${process.pid}-${randomBytes(4).toString("hex")}`;

/** A message as a receiver reads it off the broker. */
export interface BrokerMessage {
  readonly body: string;
  readonly headers: Record<string, string>;
}

export async function connectRabbitMq(): Promise<ChannelModel> {
  try {
    return await amqp.connect(RABBITMQ_URL);
  } catch (error) {
    throw new Error(
      `RabbitMQ is not reachable at ${RABBITMQ_URL.replace(/:[^:@/]*@/, ":****@")} (${String(error)}); start it ` +
        "with `rabbitmq-server -detached` (README, first screen) or set TEST_RABBITMQ_URL",
    );
  }
}

export async function connectNats(): Promise<{ connection: NatsConnection; manager: JetStreamManager }> {
  let connection: NatsConnection;
  try {
    connection = await connect({ servers: NATS_URL.replace(/^nats:\/\//, ""), timeout: 3_000 });
  } catch (error) {
    throw new Error(
      `NATS is not reachable at ${NATS_URL} (${String(error)}); start it with JetStream (README, first screen: ` +
        "nats-server -js) or set TEST_NATS_URL",
    );
  }
  try {
    return { connection, manager: await jetstreamManager(connection) };
  } catch (error) {
    await connection.close();
    throw new Error(`NATS at ${NATS_URL} has no JetStream (${String(error)}); start nats-server with -js`);
  }
}

/** A topic exchange of the test's own with a queue bound to every routing key; `messages` fills as they arrive. */
export async function rabbitMqReceiver(
  model: ChannelModel,
): Promise<{ exchange: string; messages: BrokerMessage[]; channel: Channel }> {
  const channel = await model.createChannel();
  const exchange = uniqueName("reftrail-test");
  await channel.assertExchange(exchange, "topic", { durable: false, autoDelete: true });
  const { queue } = await channel.assertQueue("", { exclusive: true });
  await channel.bindQueue(queue, exchange, "#");
  const messages: BrokerMessage[] = [];
  await channel.consume(
    queue,
    (message) => {
      if (!message) return;
      const headers = Object.fromEntries(
        Object.entries(message.properties.headers ?? {}).map(([name, value]) => [name, String(value)]),
      );
      messages.push({ body: message.content.toString("utf8"), headers });
    },
    { noAck: true },
  );
  return { exchange, messages, channel };
}

/** A stream of the test's own capturing `<prefix>.>`; `read()` gives every message stored so far, oldest first. */
export async function natsStream(manager: JetStreamManager, subjectPrefix: string) {
  const name = uniqueName("reftrail-test").replace(/[^A-Za-z0-9_-]/g, "_");
  await manager.streams.add({ name, subjects: [`${subjectPrefix}.>`] });
  return {
    name,
    async read(): Promise<BrokerMessage[]> {
      const info = await manager.streams.info(name);
      const messages: BrokerMessage[] = [];
      for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
        const stored = await manager.streams.getMessage(name, { seq });
        if (!stored) continue;
        const headers: Record<string, string> = {};
        for (const [key] of stored.header ?? []) headers[key.toLowerCase()] = stored.header.get(key);
        messages.push({ body: new TextDecoder().decode(stored.data), headers });
      }
      return messages;
    },
    delete: () => manager.streams.delete(name),
  };
}

/** A TCP port on loopback that nothing listens on (it was free a moment ago): a broker that is down. */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export const NATS_SERVER_BINARY = process.env.NATS_SERVER_BINARY ?? "/usr/sbin/nats-server";

/**
 * A test certificate authority and the certificate it signed for `localhost` (its only name: no address), valid
 * until 2126, for a NATS server that requires TLS. Test material only: the keys are public.
 */
export const BROKER_TLS = {
  caFile: join(import.meta.dirname, "../fixtures/broker-tls/ca.pem"),
  certFile: join(import.meta.dirname, "../fixtures/broker-tls/server.pem"),
  keyFile: join(import.meta.dirname, "../fixtures/broker-tls/server-key.pem"),
};

/**
 * A nats-server of the test's own, with JetStream, on a port and a store directory of its own: the test may stop
 * it (the broker is down) and start it again on the same port and store (its streams come back), without touching
 * the shared server other tests use. With `tls`, it requires TLS with BROKER_TLS's certificate.
 */
export class OwnNatsServer {
  private process: ChildProcess | null = null;
  private readonly storeDir = mkdtempSync(join(tmpdir(), "reftrail-nats-"));

  private constructor(
    readonly port: number,
    /** Whether it requires TLS, with BROKER_TLS's certificate. */
    readonly tls: boolean,
  ) {}

  static async start(options: { readonly tls?: boolean } = {}): Promise<OwnNatsServer> {
    if (!existsSync(NATS_SERVER_BINARY))
      throw new Error(
        `${NATS_SERVER_BINARY} is missing: the broker-down test starts a nats-server of its own (apt-get install ` +
          "nats-server, or set NATS_SERVER_BINARY)",
      );
    const server = new OwnNatsServer(await closedPort(), options.tls ?? false);
    await server.resume();
    return server;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** A client connection (TLS: to `localhost`, trusting the test CA) with its JetStream manager. */
  async connect(): Promise<{ connection: NatsConnection; manager: JetStreamManager }> {
    const connection = await connect({
      servers: this.tls ? `localhost:${this.port}` : `127.0.0.1:${this.port}`,
      timeout: 1_000,
      ...(this.tls ? { tls: { caFile: BROKER_TLS.caFile } } : {}),
    });
    try {
      return { connection, manager: await jetstreamManager(connection) };
    } catch (error) {
      await connection.close();
      throw error;
    }
  }

  /** Starts the server (again) and waits until it accepts JetStream requests. */
  async resume(): Promise<void> {
    const tlsArguments = this.tls ? ["--tls", "--tlscert", BROKER_TLS.certFile, "--tlskey", BROKER_TLS.keyFile] : [];
    const child = spawn(
      NATS_SERVER_BINARY,
      ["-a", "127.0.0.1", "-p", String(this.port), "-js", "-sd", this.storeDir, ...tlsArguments],
      { stdio: "ignore" },
    );
    this.process = child;
    const deadline = Date.now() + 15_000;
    for (;;) {
      try {
        const { connection, manager } = await this.connect();
        try {
          await manager.getAccountInfo();
          return;
        } finally {
          await connection.close();
        }
      } catch (error) {
        if (child.exitCode !== null || Date.now() > deadline)
          throw new Error(`the test's nats-server on port ${this.port} did not start: ${String(error)}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  }

  /** Stops the server and waits for its exit: the broker is down. */
  async stop(): Promise<void> {
    const child = this.process;
    this.process = null;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGKILL");
    await exited;
  }

  async close(): Promise<void> {
    await this.stop();
    rmSync(this.storeDir, { recursive: true, force: true });
  }
}
