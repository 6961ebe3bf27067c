import type { SecureContext } from "node:tls";
import { maskedBrokerUrl, type BrokerDestination } from "../../domain/webhooks/webhook-destination.ts";
import type { WebhookDelivery, WebhookEndpoint } from "../../domain/webhooks/webhook-models.ts";
import type { AddressGuard } from "../address-guard.ts";
import type { SendResult } from "../webhook-sender.ts";
import { signWebhook } from "../webhook-signature.ts";

/*
 * One interface for every kind of destination (SPEC §9, §9.3): the worker hands a delivery to `send` and records
 * the outcome it gets back, whatever carried it. HTTP (src/webhooks/webhook-sender.ts), RabbitMQ and NATS
 * JetStream each live in a module of their own behind it; src/webhooks/destinations/destination-router.ts picks one.
 */

/** Where a delivery goes: an HTTP(S) URL or a message broker. */
export type DeliveryDestination = { readonly kind: "http"; readonly url: string } | BrokerDestination;

export interface OutgoingDelivery<D extends DeliveryDestination = DeliveryDestination> {
  readonly destination: D;
  /** The delivery id: the `webhook-id` header (and the JetStream `Nats-Msg-Id`). */
  readonly webhookId: string;
  /** The event type: a RabbitMQ destination's default routing key. */
  readonly eventType: string;
  readonly body: string;
  /** The secrets that sign it (two during a rotation). */
  readonly secrets: readonly string[];
  /** The `webhook-timestamp`. */
  readonly timestamp: Date;
  /** For its trace span (when tracing is on): the endpoint, and which attempt of the delivery this is (1-based). */
  readonly endpointId: string;
  readonly attempt: number;
}

/** What a delivery sends now, signed with `secrets` at `timestamp`, to its endpoint's destination. */
export function outgoingDelivery(
  delivery: WebhookDelivery,
  endpoint: WebhookEndpoint,
  secrets: readonly string[],
  timestamp: Date,
): OutgoingDelivery {
  return {
    destination: endpoint.destination ?? { kind: "http", url: endpoint.url ?? "" },
    webhookId: delivery.id,
    eventType: delivery.eventType,
    body: delivery.body,
    secrets,
    timestamp,
    endpointId: delivery.endpointId,
    attempt: delivery.attemptCount + 1,
  };
}

/** Sends deliveries of one kind. Every outcome is returned, never thrown, so that the worker records it. */
export interface DeliveryTransport<D extends DeliveryDestination = DeliveryDestination> {
  /** `signal` aborts on shutdown: the result then says `aborted` and is no attempt. */
  send(delivery: OutgoingDelivery<D>, signal?: AbortSignal): Promise<SendResult>;
  /** Closes pooled connections (the worker has aborted what was in flight). */
  close(): Promise<void>;
}

/**
 * A publish the broker confirmed is recorded as this status (HTTP's "Accepted"): the retry rules, the delivery
 * log and the metrics then treat it as an HTTP success (docs/decisions.md, "Broker destinations").
 */
export const BROKER_CONFIRMED_STATUS = 202;
/** The error text of an attempt is cut to this many characters, as HTTP's. */
export const MAX_ERROR_LENGTH = 500;

/** The Standard Webhooks headers of a delivery, as HTTP sends them and brokers carry them as message headers. */
export function standardWebhookHeaders(delivery: OutgoingDelivery, userAgent: string): Record<string, string> {
  const timestamp = Math.floor(delivery.timestamp.getTime() / 1000);
  return {
    "content-type": "application/json",
    "user-agent": userAgent,
    "webhook-id": delivery.webhookId,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": signWebhook(delivery.secrets, delivery.webhookId, timestamp, delivery.body),
  };
}

/** Outcomes of a broker publish, timed from `started` (performance.now()). */
export function brokerOutcome(started: number) {
  const latencyMs = () => performance.now() - started;
  return {
    confirmed: (note: string | null): SendResult => ({
      statusCode: BROKER_CONFIRMED_STATUS,
      error: null,
      latencyMs: latencyMs(),
      responseBody: note,
      retryAfter: undefined,
      aborted: false,
    }),
    failed: (error: string, aborted = false): SendResult => ({
      statusCode: null,
      error: error.slice(0, MAX_ERROR_LENGTH),
      latencyMs: latencyMs(),
      responseBody: null,
      retryAfter: undefined,
      aborted,
    }),
  };
}

/** An error's safe text: its code and message, never a URL with credentials (callers strip those first). */
export function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as NodeJS.ErrnoException).code;
  return code && !error.message.includes(code) ? `${code}: ${error.message}` : error.message;
}

/** Rejects after `ms` with a timeout error (the caller's WEBHOOK_TIMEOUT), or when `signal` aborts. */
export function withDeadline<T>(work: Promise<T>, ms: number, signal?: AbortSignal): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const stop = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(`timed out after ${ms} ms`)), ms);
    onAbort = () => reject(new AbortedError("aborted: the server is shutting down"));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
  return Promise.race([work, stop]).finally(() => {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener("abort", onAbort);
  });
}

export class DeadlineError extends Error {
  override readonly name = "DeadlineError";
}
export class AbortedError extends Error {
  override readonly name = "AbortedError";
}

export interface BrokerTransportOptions {
  readonly guard: AddressGuard;
  readonly timeoutMs: number;
  readonly userAgent: string;
  /** Connections kept at most (one per broker URL). */
  readonly maxConnections: number;
  /** A connection unused this long is closed. */
  readonly idleMs: number;
  /**
   * The TLS context that trusts Node's authorities and WEBHOOK_BROKER_CA_FILE's (a `ca` option replaces Node's list
   * rather than adding to it, so the two are joined), built once rather than per connection; undefined: Node's own.
   */
  readonly secureContext: SecureContext | undefined;
}

/** Error texts never carry the broker URL's credentials into the delivery log. */
export function scrub(text: string, rawUrl: string): string {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    return text;
  }
  let scrubbed = text.replaceAll(rawUrl, maskedBrokerUrl(rawUrl));
  // nats://<token>@host: a user name without a password is a token (maskedBrokerUrl masks it too).
  const token = url.password === "" && url.protocol !== "amqp:" && url.protocol !== "amqps:" ? url.username : "";
  for (const secret of [url.password, safelyDecoded(url.password), token, safelyDecoded(token)])
    if (secret.length > 0) scrubbed = scrubbed.replaceAll(secret, "****");
  return scrubbed;
}

/** A URL part percent-decoded, or as it is when it is not valid percent-encoding. */
export function safelyDecoded(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}
