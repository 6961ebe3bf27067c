import type { headers, NatsConnection, TlsOptions } from "@nats-io/transport-node";
import { isIP } from "node:net";
import { checkServerIdentity, type ConnectionOptions } from "node:tls";
import type { JetStreamClient } from "@nats-io/jetstream";
import type { NatsDestination } from "../../domain/webhooks/webhook-destination.ts";
import { maskedBrokerUrl } from "../../domain/webhooks/webhook-destination.ts";
import type { SendResult } from "../webhook-sender.ts";
import { ConnectionPool } from "./connection-pool.ts";
import {
  AbortedError,
  brokerOutcome,
  DeadlineError,
  errorText,
  safelyDecoded,
  scrub,
  standardWebhookHeaders,
  withDeadline,
  type BrokerTransportOptions,
  type DeliveryTransport,
  type OutgoingDelivery,
} from "./delivery-transport.ts";

/*
 * NATS JetStream destinations: a JetStream publish, acknowledged by the stream that captures the subject, with
 * `Nats-Msg-Id` = the webhook-id, so that the stream drops a retry it already stored (within its duplicate
 * window). The clients (@nats-io/transport-node, @nats-io/jetstream) are loaded with this module, which the router
 * imports only once a NATS endpoint has a delivery.
 *
 * One connection per server URL (pooled). The host is resolved through the address guard and the connection made
 * to the address it allowed, without reconnecting on its own and ignoring the servers a cluster announces (they
 * were never checked): a lost connection is dropped from the pool and the next delivery opens a new one. A
 * `tls://` URL requires TLS (a server without it is a failed attempt), and the certificate is checked against the
 * URL's host, name or address, not against the address the guard gave the client to dial. No
 * stream for the subject (no responders), a publish error and no acknowledgement within WEBHOOK_TIMEOUT are
 * failed attempts, retried on the schedule.
 */

interface NatsLink {
  readonly connection: NatsConnection;
  readonly jetstream: JetStreamClient;
  /** The client's header constructor (loaded with it). */
  readonly headers: typeof headers;
  lost: boolean;
}

export class NatsTransport implements DeliveryTransport<NatsDestination> {
  private readonly pool: ConnectionPool<NatsLink>;

  constructor(private readonly options: BrokerTransportOptions) {
    this.pool = new ConnectionPool({
      open: (url) => this.open(url),
      close: async (link) => {
        if (!link.lost) await link.connection.close();
      },
      alive: (link) => !link.lost && !link.connection.isClosed(),
      max: options.maxConnections,
      idleMs: options.idleMs,
    });
  }

  async send(delivery: OutgoingDelivery<NatsDestination>, signal?: AbortSignal): Promise<SendResult> {
    const outcome = brokerOutcome(performance.now());
    if (signal?.aborted) return outcome.failed("aborted: the server is shutting down", true);
    const { url, subject } = delivery.destination;
    const attempt: { link: NatsLink | null } = { link: null };
    try {
      const note = await withDeadline(
        this.pool.use(url, async (link) => {
          attempt.link = link;
          if (link.lost || link.connection.isClosed()) throw new Error("connection lost");
          const messageHeaders = link.headers();
          for (const [name, value] of Object.entries(standardWebhookHeaders(delivery, this.options.userAgent)))
            messageHeaders.set(name, value);
          const ack = await link.jetstream.publish(subject, delivery.body, {
            msgID: delivery.webhookId,
            headers: messageHeaders,
            timeout: this.options.timeoutMs,
          });
          // The attempt log's "response": where the stream stored it (a duplicate: stored before, within its window).
          return JSON.stringify({ stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate });
        }),
        this.options.timeoutMs,
        signal,
      );
      return outcome.confirmed(note);
    } catch (error) {
      if (error instanceof AbortedError) return outcome.failed(error.message, true);
      const { link } = attempt;
      if (link && (link.lost || error instanceof DeadlineError)) this.pool.discard(url, link);
      const where = `nats ${maskedBrokerUrl(url)} subject ${JSON.stringify(subject)}`;
      return outcome.failed(`${where}: ${scrub(describe(error, url), url)}`);
    }
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  private async open(rawUrl: string): Promise<NatsLink> {
    const url = new URL(rawUrl);
    const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
    const port = url.port === "" ? 4222 : Number(url.port);
    // The guard refuses any address of the name that is not allowed, and answers the one to connect to.
    const { address, family } = await new Promise<{ address: string; family: number }>((resolve, reject) =>
      this.options.guard.lookupFor(port)(host, {}, (error, address, family) =>
        error ? reject(error) : resolve({ address: address as string, family: family ?? 4 }),
      ),
    );
    const [{ connect, headers }, { jetstream }] = await Promise.all([
      import("@nats-io/transport-node"),
      import("@nats-io/jetstream"),
    ]);
    const tls:
      (TlsOptions & Pick<ConnectionOptions, "servername" | "checkServerIdentity" | "secureContext">) | undefined =
      url.protocol === "tls:"
        ? {
            // SNI takes a name, never an address.
            ...(isIP(host) === 0 ? { servername: host } : {}),
            // Checked against the URL's host in so many words: the client dials an address, and for a socket
            // dialled by address Node checks the certificate against "localhost".
            checkServerIdentity: (_checked, certificate) => checkServerIdentity(host, certificate),
            ...(this.options.secureContext ? { secureContext: this.options.secureContext } : {}),
          }
        : undefined;
    const user = safelyDecoded(url.username);
    const pass = safelyDecoded(url.password);
    const connection = await connect({
      servers: family === 6 ? `[${address}]:${port}` : `${address}:${port}`,
      ...(pass !== "" ? { user, pass } : user !== "" ? { token: user } : {}),
      name: this.options.userAgent,
      timeout: this.options.timeoutMs,
      reconnect: false,
      ignoreClusterUpdates: true,
      ...(tls ? { tls } : {}),
    });
    const link: NatsLink = { connection, jetstream: jetstream(connection), headers, lost: false };
    void connection.closed().then(() => (link.lost = true));
    return link;
  }
}

function describe(error: unknown, url: string): string {
  const text = errorText(error);
  // Nobody answers a JetStream publish when no stream captures the subject; the client calls that "jetstream is
  // not enabled", which would send a receiver looking at the wrong thing.
  if (/no responders|jetstream is not enabled/i.test(text))
    return `no stream captures the subject (no responders: ${text})`;
  // A nats:// server that offers TLS is upgraded by the client on its own, with Node's authorities only and a check
  // against "localhost" (it dialled an address): a real server's certificate fails, and tls:// is the way out.
  if (url.startsWith("nats:") && /altnames|certificate/i.test(text))
    return `${text} (the server speaks TLS: give it as tls://, which checks its certificate against the URL's host)`;
  return text;
}
