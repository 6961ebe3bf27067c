import {
  type DeliveryStatus,
  type DroppedReason,
  type WebhookAttempt,
  type WebhookDelivery,
  type WebhookDeliveryView,
} from "../../domain/webhooks/webhook-models.ts";
import { toDate, toNullableDate } from "./rows.ts";
import { Prisma } from "./sql-template.ts";

/** Every column of a delivery, as raw statements select or return it (`toDeliveryFromColumns` reads them). */
export const DELIVERY_COLUMNS = Prisma.sql`"id", "organization_id", "endpoint_id", "event_id", "event_type", "body",
  "status", "attempt_count", "next_attempt_at", "lease_owner", "lease_expires_at", "created_at", "updated_at",
  "ordering_key", "event_occurred_at", "attempts_since_queued", "dropped_reason"`;

/** A delivery as a raw statement gives it (column names; the driver's types, see src/store/sql/rows.ts). */
export interface DeliveryColumns {
  readonly id: string;
  readonly organization_id: string;
  readonly endpoint_id: string;
  readonly event_id: string;
  readonly event_type: string;
  readonly body: string;
  readonly status: string;
  readonly attempt_count: number | bigint;
  /** Timestamps come back as the driver reads them: ISO text on SQLite, Date on PostgreSQL. */
  readonly next_attempt_at: unknown;
  readonly lease_owner: string | null;
  readonly lease_expires_at: unknown;
  readonly created_at: unknown;
  readonly updated_at: unknown;
  readonly ordering_key: string | null;
  readonly event_occurred_at: unknown;
  readonly attempts_since_queued: number | bigint;
  readonly dropped_reason: string | null;
}

export function toDeliveryFromColumns(row: DeliveryColumns): WebhookDelivery {
  return {
    id: row.id,
    organizationId: row.organization_id,
    endpointId: row.endpoint_id,
    eventId: row.event_id,
    eventType: row.event_type,
    body: row.body,
    status: row.status as DeliveryStatus,
    attemptCount: Number(row.attempt_count),
    attemptsSinceQueued: Number(row.attempts_since_queued),
    nextAttemptAt: toNullableDate(row.next_attempt_at),
    leaseOwner: row.lease_owner,
    leaseExpiresAt: toNullableDate(row.lease_expires_at),
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
    orderingKey: row.ordering_key,
    eventOccurredAt: toNullableDate(row.event_occurred_at),
    droppedReason: row.dropped_reason as DroppedReason | null,
  };
}

/**
 * Every column of the delivery `d`, and why it may be held back: "held_back", pending behind an earlier pending
 * delivery of its reference (the "held" flag the claim itself obeys, kept by the triggers of migration 0014), and,
 * for a pending delivery that is not, its endpoint's throttle schedule (NULL when the endpoint has no throttle), so
 * that the API says what the worker does.
 */
export const DELIVERY_VIEW_COLUMNS = Prisma.sql`${DELIVERY_COLUMNS},
  CASE WHEN d."status" = 'pending' AND d."held" THEN 1 ELSE 0 END AS "held_back",
  t."theoretical_arrival_us" AS "throttle_next_us"`;

/**
 * What DELIVERY_VIEW_COLUMNS reads beside the delivery `d`: the throttle schedule of its endpoint, only for a
 * pending delivery that nothing else holds back (others cost no lookup).
 */
export const DELIVERY_VIEW_JOINS = Prisma.sql`LEFT JOIN (
    SELECT w."endpoint_id" AS "throttled_endpoint_id", w."theoretical_arrival_us"
    FROM "webhook_endpoint_throttles" w JOIN "webhook_endpoints" e ON e."id" = w."endpoint_id"
    WHERE e."max_deliveries_per_second" IS NOT NULL
  ) t ON d."status" = 'pending' AND NOT d."held" AND t."throttled_endpoint_id" = d."endpoint_id"`;

export interface DeliveryViewColumns extends DeliveryColumns {
  readonly held_back: number | bigint;
  readonly throttle_next_us: number | bigint | string | null;
}

/**
 * The delivery with why it waits. "throttled": due and not leased, while its endpoint's schedule has its slots
 * given up to a later time than now (throttle-schedule.ts: the claim gives slots as they come).
 */
export function toDeliveryViewFromColumns(row: DeliveryViewColumns, now = new Date()): WebhookDeliveryView {
  const delivery = toDeliveryFromColumns(row);
  if (Number(row.held_back) === 1) return { ...delivery, heldBack: true, heldBackReason: "ordering" };
  const throttled =
    row.throttle_next_us !== null &&
    Number(row.throttle_next_us) > now.getTime() * 1_000 &&
    delivery.nextAttemptAt !== null &&
    delivery.nextAttemptAt <= now &&
    (delivery.leaseExpiresAt === null || delivery.leaseExpiresAt < now);
  return throttled
    ? { ...delivery, heldBack: true, heldBackReason: "throttled" }
    : { ...delivery, heldBack: false, heldBackReason: null };
}

/** Every column of the attempt `a`, as `AttemptColumns` reads them. */
export const ATTEMPT_COLUMNS = Prisma.sql`a."id", a."delivery_id", a."attempted_at", a."status_code", a."error",
  a."latency_ms", a."response_body"`;

/** An attempt as a raw statement reads it. */
export interface AttemptColumns {
  readonly id: string;
  readonly delivery_id: string;
  readonly attempted_at: unknown;
  readonly status_code: number | null;
  readonly error: string | null;
  readonly latency_ms: number;
  readonly response_body: string | null;
}

export function toAttemptFromColumns(row: AttemptColumns): WebhookAttempt {
  return {
    id: row.id,
    deliveryId: row.delivery_id,
    attemptedAt: toDate(row.attempted_at),
    statusCode: row.status_code === null ? null : Number(row.status_code),
    error: row.error,
    latencyMs: Number(row.latency_ms),
    responseBody: row.response_body,
  };
}
