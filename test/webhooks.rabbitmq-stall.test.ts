import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import type { ChannelModel } from "amqplib";
import { connectRabbitMq, RABBITMQ_URL, rabbitMqReceiver } from "./support/brokers.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { createEndpoint, createReference, eventually, getDelivery, listDeliveries } from "./support/webhooks.ts";

/*
 * A RabbitMQ broker that accepts connections and then stalls the AMQP handshake must cost the attempts made
 * meanwhile and nothing more (issue 49.2): each attempt times out, its socket is destroyed, and once the broker
 * answers again (here: the same URL, a proxy of the test's own that first stalls, then forwards to the real
 * RabbitMQ) the next attempt opens a new connection and succeeds.
 */

const ENV = {
  WEBHOOK_RETRY_SCHEDULE: `0s,${Array.from({ length: 40 }, () => "300ms").join(",")}`,
  WEBHOOK_TIMEOUT: "1s",
  WEBHOOK_LEASE: "10s",
  WEBHOOK_POLL_INTERVAL: "50ms",
  WEBHOOK_DISABLE_AFTER: "1h",
};

/**
 * A TCP proxy in front of RabbitMQ. Stalling, it accepts and answers the AMQP protocol header with the start of a
 * frame it never finishes, one byte every 100 ms: the socket is never idle, so a client's idle timeout never
 * fires, and the handshake never completes. Forwarding, it pipes to the real broker.
 */
class StallingBrokerProxy {
  mode: "stall" | "forward" = "stall";
  readonly stalled: Socket[] = [];
  stalledClosedByClient = 0;
  forwarded = 0;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly sockets = new Set<Socket>();

  private constructor(private readonly server: Server) {}

  static async start(): Promise<StallingBrokerProxy> {
    const server = createServer();
    const proxy = new StallingBrokerProxy(server);
    server.on("connection", (socket) => proxy.accept(socket));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return proxy;
  }

  get url(): string {
    const address = this.server.address() as { port: number };
    return RABBITMQ_URL.replace(/:5672\//, `:${address.port}/`);
  }

  private accept(socket: Socket): void {
    this.sockets.add(socket);
    socket.on("error", () => undefined);
    socket.once("close", () => this.sockets.delete(socket));
    if (this.mode === "forward") {
      this.forwarded++;
      const broker = new URL(RABBITMQ_URL);
      const upstream = createConnection(Number(broker.port || 5672), broker.hostname);
      upstream.on("error", () => socket.destroy());
      socket.once("close", () => upstream.destroy());
      socket.pipe(upstream).pipe(socket);
      return;
    }
    this.stalled.push(socket);
    // A method frame header (type 1, channel 0, size 64): the parser waits for 64 bytes that come one by one.
    const frame = Buffer.from([1, 0, 0, 0, 0, 0, 64, ...Array.from({ length: 64 }, () => 0)]);
    let sent = 0;
    const timer = setInterval(() => {
      if (sent < frame.length && !socket.destroyed) socket.write(frame.subarray(sent, ++sent));
    }, 100);
    this.timers.add(timer);
    socket.once("close", () => {
      clearInterval(timer);
      this.timers.delete(timer);
      if (this.mode === "stall" || !socket.writableEnded) this.stalledClosedByClient++;
    });
  }

  async close(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

describe.each(DATABASE_KINDS)("a RabbitMQ broker that stalls its handshake on %s", (kind) => {
  let server: TestServer;
  let rabbit: ChannelModel;
  let proxy: StallingBrokerProxy;

  beforeAll(async () => {
    rabbit = await connectRabbitMq();
    proxy = await StallingBrokerProxy.start();
    server = await startTestServer(kind, { env: ENV });
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    await proxy?.close();
    await rabbit?.close();
  });

  it("times the open out as an attempt, destroys the socket, and connects anew once the broker answers", async () => {
    const queue = await rabbitMqReceiver(rabbit);
    try {
      const endpoint = await createEndpoint(server, {
        destination: { kind: "rabbitmq", url: proxy.url, exchange: queue.exchange, routing_key: "tracking" },
      });
      const reference = await createReference(server);
      // Attempts fail while the handshake stalls, and the client gives each stalled socket up.
      const failing = await eventually(async () => {
        const [delivery] = await listDeliveries(server, endpoint.id);
        return delivery && delivery.attempt_count >= 2 && proxy.stalledClosedByClient >= 2
          ? getDelivery(server, endpoint.id, delivery.id)
          : null;
      }, 20_000);
      expect(failing.attempts[0].error).toMatch(/AMQP handshake|timed out/);
      expect(failing.attempts[0].error).not.toMatch(/guest:guest/);
      expect(queue.messages).toEqual([]);

      // The broker answers again behind the same URL: a new connection, and the delivery goes.
      proxy.mode = "forward";
      await eventually(async () => queue.messages.length >= 1, 15_000, "the RabbitMQ message");
      expect(JSON.parse(queue.messages[0]!.body)).toMatchObject({ reference_id: reference.id });
      expect(proxy.forwarded).toBeGreaterThanOrEqual(1);
      await eventually(
        async () => (await listDeliveries(server, endpoint.id))[0]?.status === "succeeded",
        15_000,
        "the delivery recorded as succeeded",
      );
      // Every stalled socket was closed by the client, none left open on the broker's side.
      await eventually(async () => proxy.stalled.every((socket) => socket.destroyed), 10_000, "stalled sockets closed");
    } finally {
      await queue.channel.close();
    }
  });
});
