import type { LifecycleEventType } from "../../domain/lifecycle/lifecycle-event.ts";
import type { WebhookSigning } from "../../domain/webhooks/signing-keys.ts";
import { maskedBrokerUrl, type BrokerDestination } from "../../domain/webhooks/webhook-destination.ts";
import type { PreviousSecret, WebhookEndpoint, WebhookOrdering } from "../../domain/webhooks/webhook-models.ts";
import type { DatabaseProvider } from "../database.ts";
import { isEncrypted, type SecretCipher } from "../secret-cipher.ts";
import { fromJson, toBoolean, toDate, toNullableDate } from "./rows.ts";
import { Prisma } from "./sql-template.ts";

/*
 * An endpoint row and the domain's endpoint, both ways. The signing secrets are stored encrypted (the domain sees
 * them plain; so are ed25519 private keys, which sit in the same columns), the event types as JSON, and the tag
 * filter as a flag beside its rows in "webhook_endpoint_tags".
 */

/** An endpoint as a raw statement reads it (column names; the driver's types, see src/store/sql/rows.ts). */
export interface EndpointColumns {
  readonly id: string;
  readonly organization_id: string;
  readonly url: string;
  readonly event_types: unknown;
  readonly description: string | null;
  readonly enabled: unknown;
  readonly disabled_reason: string | null;
  readonly secret: string;
  readonly previous_secret: string | null;
  readonly previous_secret_expires_at: unknown;
  readonly failing_since: unknown;
  readonly tag_filtered: unknown;
  readonly ordering: string;
  readonly created_at: unknown;
  readonly updated_at: unknown;
  readonly version: number | bigint;
  readonly signing: string;
  readonly public_key: string | null;
  readonly max_deliveries_per_second: number | bigint | null;
  readonly destination: string | null;
}

/** Every column of the endpoint `e`, as `EndpointColumns` reads them. */
export const ENDPOINT_COLUMNS = Prisma.sql`e."id", e."organization_id", e."url", e."event_types", e."description",
  e."enabled", e."disabled_reason", e."secret", e."previous_secret", e."previous_secret_expires_at",
  e."failing_since", e."tag_filtered", e."ordering", e."created_at", e."updated_at", e."version", e."signing",
  e."public_key", e."max_deliveries_per_second", e."destination"`;

/** The stored list of secrets rotated out, inside its encrypted envelope. */
interface StoredPreviousSecret {
  readonly secret: string;
  readonly expires_at: string;
}

/** The values of the columns that differ from the domain's endpoint. */
export interface StoredEndpointColumns {
  /** The HTTP URL, or a broker destination's URL with its password masked (for people reading the table). */
  readonly url: string;
  /** A broker destination: one encrypted envelope of its JSON, the URL's credentials inside; null for HTTP. */
  readonly destination: string | null;
  readonly secret: string;
  readonly previousSecrets: string | null;
  /** A parameter: JSON text on SQLite, jsonb on PostgreSQL; SQL NULL for every event type. */
  readonly eventTypes: Prisma.Sql;
  readonly tagFiltered: boolean;
}

export function toStoredEndpointColumns(
  endpoint: WebhookEndpoint,
  provider: DatabaseProvider,
  secrets: SecretCipher,
): StoredEndpointColumns {
  const previous: StoredPreviousSecret[] = endpoint.previousSecrets.map((item) => ({
    secret: item.secret,
    expires_at: item.expiresAt.toISOString(),
  }));
  // null is SQL NULL (every event type), not the JSON value null.
  const eventTypes = endpoint.eventTypes === null ? null : JSON.stringify(endpoint.eventTypes);
  const { destination } = endpoint;
  return {
    url: destination ? maskedBrokerUrl(destination.url) : (endpoint.url ?? ""),
    destination: destination ? secrets.encrypt(JSON.stringify(toStoredDestination(destination))) : null,
    secret: secrets.encrypt(endpoint.secret),
    // One envelope for the whole list: the row stays one row however many rotations happened in 24 hours.
    previousSecrets: previous.length === 0 ? null : secrets.encrypt(JSON.stringify(previous)),
    eventTypes: provider === "postgres" ? Prisma.sql`CAST(${eventTypes} AS JSONB)` : Prisma.sql`${eventTypes}`,
    tagFiltered: endpoint.tagIds !== null,
  };
}

/** The domain's endpoint from its row and the tag ids of its filter rows (ignored when it has no filter). */
export function toEndpointFromColumns(
  row: EndpointColumns,
  tagIds: readonly string[],
  secrets: SecretCipher,
): WebhookEndpoint {
  return {
    id: row.id,
    organizationId: row.organization_id,
    url: row.destination === null ? row.url : null,
    destination: row.destination === null ? null : fromStoredDestination(secrets.decrypt(row.destination)),
    eventTypes: (fromJson(row.event_types) as LifecycleEventType[] | null) ?? null,
    tagIds: toBoolean(row.tag_filtered) ? [...tagIds] : null,
    description: row.description,
    enabled: toBoolean(row.enabled),
    disabledReason: row.disabled_reason,
    secret: secrets.decrypt(row.secret),
    signing: row.signing as WebhookSigning,
    publicKey: row.public_key,
    maxDeliveriesPerSecond: row.max_deliveries_per_second === null ? null : Number(row.max_deliveries_per_second),
    previousSecrets: readPreviousSecrets(row, secrets),
    previousSecretExpiresAt: toNullableDate(row.previous_secret_expires_at),
    failingSince: toNullableDate(row.failing_since),
    ordering: row.ordering as WebhookOrdering,
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
    version: Number(row.version),
  };
}

function readPreviousSecrets(row: EndpointColumns, secrets: SecretCipher): PreviousSecret[] {
  if (row.previous_secret === null) return [];
  // A value stored before encryption is the one previous secret in plain text, valid until the expiry column.
  if (!isEncrypted(row.previous_secret)) {
    const expiresAt = toNullableDate(row.previous_secret_expires_at);
    return expiresAt ? [{ secret: row.previous_secret, expiresAt }] : [];
  }
  const stored = JSON.parse(secrets.decrypt(row.previous_secret)) as StoredPreviousSecret[];
  return stored.map((item) => ({ secret: item.secret, expiresAt: new Date(item.expires_at) }));
}

/** A broker destination as stored (inside its envelope): the REST field names, so that the JSON reads as sent. */
type StoredDestination =
  | { readonly kind: "rabbitmq"; readonly url: string; readonly exchange: string; readonly routing_key: string | null }
  | { readonly kind: "nats"; readonly url: string; readonly subject: string };

function toStoredDestination(destination: BrokerDestination): StoredDestination {
  if (destination.kind === "nats") return destination;
  const { kind, url, exchange, routingKey } = destination;
  return { kind, url, exchange, routing_key: routingKey };
}

function fromStoredDestination(text: string): BrokerDestination {
  const stored = JSON.parse(text) as StoredDestination;
  if (stored.kind === "nats") return { kind: "nats", url: stored.url, subject: stored.subject };
  return { kind: "rabbitmq", url: stored.url, exchange: stored.exchange, routingKey: stored.routing_key };
}
