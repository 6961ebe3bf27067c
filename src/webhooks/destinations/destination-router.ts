import { createSecureContext, rootCertificates } from "node:tls";
import type { NatsDestination, RabbitMqDestination } from "../../domain/webhooks/webhook-destination.ts";
import { WEBHOOK_USER_AGENT, type SendResult, type WebhookSender } from "../webhook-sender.ts";
import type { BrokerTransportOptions, DeliveryTransport, OutgoingDelivery } from "./delivery-transport.ts";

/*
 * The worker's one sender: hands each delivery to the transport of its destination's kind. The broker transports
 * (and their client libraries with them) are imported the first time a delivery of their kind goes out, so that a
 * server without broker endpoints never loads them.
 */

/** Broker connections kept at most, per kind (one per broker URL). */
const MAX_BROKER_CONNECTIONS = 64;
/** A broker connection unused this long is closed. */
const BROKER_IDLE_MS = 60_000;

export class DestinationRouter implements DeliveryTransport {
  private rabbitmq: Promise<DeliveryTransport<RabbitMqDestination>> | null = null;
  private nats: Promise<DeliveryTransport<NatsDestination>> | null = null;
  private readonly brokerOptions: BrokerTransportOptions;

  constructor(
    private readonly http: WebhookSender,
    options: Pick<BrokerTransportOptions, "guard" | "timeoutMs"> & {
      /** WEBHOOK_BROKER_CA_FILE's certificates; absent or null: Node's authorities only. */
      readonly extraCaCertificates?: string | null;
    },
  ) {
    const { extraCaCertificates, ...rest } = options;
    this.brokerOptions = {
      ...rest,
      secureContext:
        extraCaCertificates == null
          ? undefined
          : createSecureContext({ ca: [...rootCertificates, extraCaCertificates] }),
      userAgent: WEBHOOK_USER_AGENT,
      maxConnections: MAX_BROKER_CONNECTIONS,
      idleMs: BROKER_IDLE_MS,
    };
  }

  async send(delivery: OutgoingDelivery, signal?: AbortSignal): Promise<SendResult> {
    const { destination } = delivery;
    switch (destination.kind) {
      case "http":
        return this.http.send({ ...delivery, url: destination.url }, signal);
      case "rabbitmq":
        this.rabbitmq ??= import("./rabbitmq-transport.ts").then(
          ({ RabbitMqTransport }) => new RabbitMqTransport(this.brokerOptions),
        );
        return (await this.rabbitmq).send({ ...delivery, destination }, signal);
      case "nats":
        this.nats ??= import("./nats-transport.ts").then(({ NatsTransport }) => new NatsTransport(this.brokerOptions));
        return (await this.nats).send({ ...delivery, destination }, signal);
    }
  }

  async close(): Promise<void> {
    await Promise.all([
      this.http.close(),
      this.rabbitmq?.then((transport) => transport.close()),
      this.nats?.then((transport) => transport.close()),
    ]);
  }
}
