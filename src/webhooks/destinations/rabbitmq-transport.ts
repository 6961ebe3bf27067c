import diagnosticsChannel from "node:diagnostics_channel";
import { isIP, Socket } from "node:net";
import type { ChannelModel, ConfirmChannel } from "amqplib";
import type { RabbitMqDestination } from "../../domain/webhooks/webhook-destination.ts";
import { maskedBrokerUrl } from "../../domain/webhooks/webhook-destination.ts";
import type { SendResult } from "../webhook-sender.ts";
import { portOf } from "../address-guard.ts";
import { ConnectionPool } from "./connection-pool.ts";
import {
  AbortedError,
  brokerOutcome,
  DeadlineError,
  errorText,
  scrub,
  standardWebhookHeaders,
  withDeadline,
  type BrokerTransportOptions,
  type DeliveryTransport,
  type OutgoingDelivery,
} from "./delivery-transport.ts";

/*
 * RabbitMQ destinations: AMQP 0-9-1 with publisher confirms (amqplib, loaded with this module, which the router
 * imports only once a RabbitMQ endpoint has a delivery). One connection per broker URL (pooled), one confirm
 * channel per exchange on it: a publish to an exchange that does not exist makes the broker close the channel
 * (404), which then fails only that exchange's publishes in flight, not every endpoint's on the same broker.
 *
 * An attempt succeeds when the broker confirms (basic.ack); a nack, a closed channel (no such exchange, access
 * refused), a connection that cannot be opened or is lost, and no confirm within WEBHOOK_TIMEOUT are failed
 * attempts, retried on the schedule. Messages are persistent; the exchange routes them as it is declared (an
 * unroutable message is confirmed and dropped by the broker, as the receiver's bindings decide).
 */

class RabbitConnection {
  /** One confirm channel per exchange, opened on first use; a closed one is removed and opened again. */
  private readonly channels = new Map<string, Promise<ExchangeChannel>>();
  /** Why the connection closed, once it has. */
  failure: string | null = null;

  constructor(readonly model: ChannelModel) {
    model.on("error", (error: unknown) => (this.failure = `connection failed: ${errorText(error)}`));
    model.on("close", () => (this.failure ??= "connection closed by the broker"));
  }

  channel(exchange: string): Promise<ExchangeChannel> {
    let channel = this.channels.get(exchange);
    if (!channel) {
      channel = this.model.createConfirmChannel().then((opened) => new ExchangeChannel(opened));
      this.channels.set(exchange, channel);
      const created = channel;
      const forget = () => {
        if (this.channels.get(exchange) === created) this.channels.delete(exchange);
      };
      created.then((opened) => opened.onClose(forget), forget);
    }
    return channel;
  }
}

class ExchangeChannel {
  /** The broker's reason for closing the channel (e.g. `404 (NOT-FOUND) ... no exchange`). */
  private reason: string | null = null;
  private closed = false;
  private readonly closeListeners: (() => void)[] = [];

  constructor(private readonly channel: ConfirmChannel) {
    channel.on("error", (error: unknown) => (this.reason = errorText(error)));
    channel.on("close", () => {
      this.closed = true;
      for (const listener of this.closeListeners) listener();
    });
  }

  onClose(listener: () => void): void {
    if (this.closed) listener();
    else this.closeListeners.push(listener);
  }

  publish(
    exchange: string,
    routingKey: string,
    body: Buffer,
    headers: Record<string, string>,
    webhookId: string,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      const settle = (error: unknown) => {
        if (!error) return resolve();
        // The callback only says "channel closed"; the broker's reason came with the channel's error just before.
        reject(new Error(this.reason ?? errorText(error)));
      };
      try {
        this.channel.publish(
          exchange,
          routingKey,
          body,
          {
            contentType: "application/json",
            messageId: webhookId,
            timestamp: Number(headers["webhook-timestamp"]),
            appId: "reftrail",
            persistent: true,
            headers,
          },
          settle,
        );
      } catch (error) {
        settle(error);
      }
    });
  }
}

export class RabbitMqTransport implements DeliveryTransport<RabbitMqDestination> {
  private readonly pool: ConnectionPool<RabbitConnection>;

  constructor(private readonly options: BrokerTransportOptions) {
    this.pool = new ConnectionPool({
      open: (url) => this.open(url),
      close: async (connection) => {
        if (connection.failure === null) await connection.model.close();
      },
      alive: (connection) => connection.failure === null,
      max: options.maxConnections,
      idleMs: options.idleMs,
    });
  }

  async send(delivery: OutgoingDelivery<RabbitMqDestination>, signal?: AbortSignal): Promise<SendResult> {
    const outcome = brokerOutcome(performance.now());
    if (signal?.aborted) return outcome.failed("aborted: the server is shutting down", true);
    const { url, exchange, routingKey } = delivery.destination;
    const headers = standardWebhookHeaders(delivery, this.options.userAgent);
    const attempt: { connection: RabbitConnection | null } = { connection: null };
    try {
      await withDeadline(
        this.pool.use(url, async (connection) => {
          attempt.connection = connection;
          if (connection.failure) throw new Error(connection.failure);
          const channel = await connection.channel(exchange);
          const body = Buffer.from(delivery.body, "utf8");
          await channel.publish(exchange, routingKey ?? delivery.eventType, body, headers, delivery.webhookId);
        }),
        this.options.timeoutMs,
        signal,
      );
      return outcome.confirmed(null);
    } catch (error) {
      if (error instanceof AbortedError) return outcome.failed(error.message, true);
      // A connection that failed, or kept a confirm past the deadline, is replaced for the next delivery.
      const { connection } = attempt;
      if (connection && (connection.failure !== null || error instanceof DeadlineError))
        this.pool.discard(url, connection);
      const where = `rabbitmq ${maskedBrokerUrl(url)} exchange ${JSON.stringify(exchange)}`;
      return outcome.failed(`${where}: ${scrub(errorText(error), url)}`);
    }
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private async open(rawUrl: string): Promise<RabbitConnection> {
    const url = new URL(rawUrl);
    const literal = url.hostname.replace(/^\[(.*)\]$/, "$1");
    // A name is checked by the guarded lookup of the connection; an address literal never reaches a lookup.
    const port = portOf(url);
    if (isIP(literal) !== 0) {
      const reason = this.options.guard.refusalReason(literal, port);
      if (reason) throw new Error(`target refused: ${reason}`);
    }
    const amqp = await import("amqplib");
    const { result: connecting, sockets } = capturingClientSockets(() =>
      amqp.connect(rawUrl, {
        lookup: this.options.guard.lookupFor(port),
        timeout: this.options.timeoutMs,
        clientProperties: { connection_name: this.options.userAgent },
        // amqps:// only: the socket options go to tls.connect, which checks the certificate against the URL's host.
        ...(this.options.secureContext ? { secureContext: this.options.secureContext } : {}),
      }),
    );
    // amqplib's `timeout` is the socket's idle timeout: a broker that accepts and then stalls the AMQP handshake
    // while its socket still sees traffic (heartbeats) would hold the open, and with it the pool's entry for this
    // URL, for ever. The whole open (TCP, TLS, handshake) gets the attempt's deadline; past it the socket is
    // destroyed, so the pool forgets the entry and the next delivery opens a new connection.
    try {
      return new RabbitConnection(await withDeadline(connecting, this.options.timeoutMs));
    } catch (error) {
      if (!(error instanceof DeadlineError)) throw error;
      for (const socket of sockets) socket.destroy();
      // Should the open still complete (a TLS socket is not captured), the connection is closed at once.
      connecting.then(
        (late) => late.close().catch(() => undefined),
        () => undefined,
      );
      throw new Error(`the broker did not complete the AMQP handshake within ${this.options.timeoutMs} ms`);
    }
  }
}

/**
 * Runs `open` and returns, with its result, the TCP client sockets created while it ran synchronously (Node's
 * `net.client.socket` diagnostics channel): amqplib creates its socket inside `connect` and gives no handle on it
 * until the handshake completes. Sockets made by tls.connect are not published on that channel.
 */
function capturingClientSockets<T>(open: () => T): { result: T; sockets: Socket[] } {
  const sockets: Socket[] = [];
  const capture = (message: unknown) => {
    const socket = (message as { socket?: unknown }).socket;
    if (socket instanceof Socket) sockets.push(socket);
  };
  diagnosticsChannel.subscribe("net.client.socket", capture);
  try {
    return { result: open(), sockets };
  } finally {
    diagnosticsChannel.unsubscribe("net.client.socket", capture);
  }
}
