import type { FieldIssue } from "../shared/errors.ts";
import { MAX_URL_LENGTH, type WebhookTargetPolicy } from "./endpoint-url.ts";

/*
 * Broker destinations (SPEC §9.3): an endpoint delivers to an HTTP(S) `url` or, instead, to a RabbitMQ exchange
 * or a NATS JetStream subject. The exchange and the stream are the receiver's: reftrail never creates them. The
 * broker URL may hold credentials, so it is stored encrypted and read back with its password masked.
 */

export const DESTINATION_KINDS = ["rabbitmq", "nats"] as const;
export type DestinationKind = (typeof DESTINATION_KINDS)[number];

export interface RabbitMqDestination {
  readonly kind: "rabbitmq";
  /** `amqp://` or `amqps://`, credentials and vhost included. */
  readonly url: string;
  readonly exchange: string;
  /** null: the event type (`webhook_test` for a test event). */
  readonly routingKey: string | null;
}

export interface NatsDestination {
  readonly kind: "nats";
  /**
   * `nats://`, or `tls://` for a connection that must be TLS with the certificate checked against the URL's host;
   * credentials included (`user:password@` or a `token@`).
   */
  readonly url: string;
  readonly subject: string;
}

export type BrokerDestination = RabbitMqDestination | NatsDestination;

const SCHEMES: Record<DestinationKind, readonly string[]> = {
  rabbitmq: ["amqp:", "amqps:"],
  nats: ["nats:", "tls:"],
};
/** AMQP 0-9-1 short strings (exchange names, routing keys) are at most 255 bytes. */
const MAX_AMQP_NAME_BYTES = 255;
const MAX_SUBJECT_LENGTH = 255;
/** An exchange name: letters, digits, `-`, `_`, `.`, `:` (what RabbitMQ accepts). */
const EXCHANGE_NAME = /^[A-Za-z0-9_.:-]+$/;
/** A NATS subject to publish to: dot-separated tokens, no wildcards, no whitespace. */
const SUBJECT = /^[^\s.*>]+(?:\.[^\s.*>]+)*$/;
const MASK = "****";

/** The destination's URL with its password (or a NATS token) replaced by `****`. */
export function maskedBrokerUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return MASK;
  }
  if (url.password !== "") url.password = MASK;
  // nats://<token>@host (or tls://): a user name alone is a token, as secret as a password.
  else if (url.username !== "" && url.protocol !== "amqp:" && url.protocol !== "amqps:") url.username = MASK;
  return url.toString();
}

/** The destination as reads show it: the URL masked, everything else as stored. */
export function maskedDestination(destination: BrokerDestination): BrokerDestination {
  return { ...destination, url: maskedBrokerUrl(destination.url) };
}

/**
 * Validates a destination as either surface sends it (`{ kind, url, exchange, routingKey }` or
 * `{ kind, url, subject }`). `current`: the endpoint's destination on an update; a destination of the same kind
 * without `url` keeps the current URL (it is never shown back, so a caller changing the exchange cannot resend it).
 */
export async function validateDestination(
  raw: unknown,
  current: BrokerDestination | null,
  targets: WebhookTargetPolicy,
): Promise<{ destination: BrokerDestination; issues: [] } | { destination: null; issues: FieldIssue[] }> {
  const issues: FieldIssue[] = [];
  const fail = () => ({ destination: null, issues });
  const issue = (field: string | null, code: string, message: string) =>
    issues.push({ path: field === null ? ["destination"] : ["destination", field], code, message });
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    issue(null, "INVALID_TYPE", "destination must be an object with kind rabbitmq or nats");
    return fail();
  }
  const input = raw as Record<string, unknown>;
  const kind = input.kind;
  if (typeof kind !== "string" || !(DESTINATION_KINDS as readonly string[]).includes(kind)) {
    issue("kind", "INVALID_ENUM", `destination kind must be one of ${DESTINATION_KINDS.join(", ")}`);
    return fail();
  }
  const allowed = kind === "rabbitmq" ? ["kind", "url", "exchange", "routingKey"] : ["kind", "url", "subject"];
  for (const key of Object.keys(input))
    if (!allowed.includes(key) && input[key] !== undefined)
      issue(key, "UNKNOWN_FIELD", `a ${kind} destination has no field ${key} (it has ${allowed.join(", ")})`);

  let url: string | null = null;
  if (input.url === undefined || input.url === null) {
    if (current?.kind === kind) url = current.url;
    else issue("url", "REQUIRED", `destination url is required (${SCHEMES[kind as DestinationKind].join(" or ")})`);
  } else {
    url = await validateBrokerUrl(input.url, kind as DestinationKind, targets, issue);
  }

  if (kind === "rabbitmq") {
    const exchange = amqpName(input.exchange, "exchange", true, issue);
    const routingKey = amqpName(input.routingKey, "routingKey", false, issue);
    if (issues.length > 0 || url === null || exchange === null) return fail();
    return { destination: { kind, url, exchange, routingKey }, issues: [] };
  }
  let subject: string | null = null;
  if (typeof input.subject !== "string" || input.subject.length === 0 || input.subject.length > MAX_SUBJECT_LENGTH)
    issue("subject", "INVALID_LENGTH", `destination subject must be 1 to ${MAX_SUBJECT_LENGTH} characters`);
  else if (!SUBJECT.test(input.subject))
    issue("subject", "INVALID_SUBJECT", "destination subject must be dot-separated tokens without wildcards or spaces");
  else subject = input.subject;
  if (issues.length > 0 || url === null || subject === null) return fail();
  return { destination: { kind: "nats", url, subject }, issues: [] };
}

async function validateBrokerUrl(
  raw: unknown,
  kind: DestinationKind,
  targets: WebhookTargetPolicy,
  issue: (field: string, code: string, message: string) => void,
): Promise<string | null> {
  const schemes = SCHEMES[kind];
  if (typeof raw !== "string" || raw.trim().length === 0 || raw.trim().length > MAX_URL_LENGTH) {
    issue("url", "INVALID_LENGTH", `destination url must be a string of 1 to ${MAX_URL_LENGTH} characters`);
    return null;
  }
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    issue("url", "INVALID_URL", "destination url is not an absolute URL");
    return null;
  }
  if (!schemes.includes(url.protocol)) {
    issue("url", "INVALID_SCHEME", `a ${kind} destination url must use ${schemes.map((s) => s + "//").join(" or ")}`);
    return null;
  }
  if (url.hostname === "") {
    issue("url", "INVALID_URL", "destination url has no host");
    return null;
  }
  if (url.hash !== "") {
    issue("url", "FRAGMENT_NOT_ALLOWED", "destination url must not contain a #fragment");
    return null;
  }
  try {
    decodeURIComponent(url.username);
    decodeURIComponent(url.password);
  } catch {
    issue("url", "INVALID_URL", "destination url credentials must be valid percent-encoding");
    return null;
  }
  const refusal = await targets.refusalReason(url);
  if (refusal) {
    issue("url", "TARGET_NOT_ALLOWED", `destination url target is not allowed: ${refusal}`);
    return null;
  }
  return url.toString();
}

function amqpName(
  raw: unknown,
  field: "exchange" | "routingKey",
  required: boolean,
  issue: (field: string, code: string, message: string) => void,
): string | null {
  if (raw === undefined || raw === null) {
    if (required) issue(field, "REQUIRED", `destination ${field} is required`);
    return null;
  }
  const minimum = field === "exchange" ? 1 : 0;
  if (typeof raw !== "string" || raw.length < minimum || new TextEncoder().encode(raw).length > MAX_AMQP_NAME_BYTES) {
    issue(field, "INVALID_LENGTH", `destination ${field} must be a string of ${minimum} to 255 bytes`);
    return null;
  }
  // The default exchange ("") routes by queue name; an endpoint names an exchange of the receiver's.
  if (field === "exchange" && !EXCHANGE_NAME.test(raw)) {
    issue(field, "INVALID_NAME", "destination exchange may hold letters, digits and - _ . : only");
    return null;
  }
  return raw;
}
