import type { WebhookAttempt, WebhookDelivery, WebhookDeliveryView } from "../../domain/webhooks/webhook-models.ts";
import type { DeliveryListQuery } from "../../domain/webhooks/webhook-repository.ts";
import type { DatabaseProvider } from "../database.ts";
import type { SqlExecutor } from "./executor.ts";
import { findInChunks } from "./in-chunks.ts";
import { chunksOf } from "./rows.ts";
import {
  ATTEMPT_COLUMNS,
  DELIVERY_COLUMNS,
  DELIVERY_VIEW_COLUMNS,
  DELIVERY_VIEW_JOINS,
  toAttemptFromColumns,
  toDeliveryFromColumns,
  toDeliveryViewFromColumns,
  type AttemptColumns,
  type DeliveryColumns,
  type DeliveryViewColumns,
} from "./webhook-delivery-rows.ts";
import { lockOrdersInSortedOrder, orderingKeyWhenSentAgain } from "./webhook-ordering-queries.ts";
import { Prisma } from "./sql-template.ts";
import { isOneOf } from "./value-lists.ts";
import { literalLimit } from "./literal-limit.ts";

/*
 * The outbox, "webhook_deliveries", with the attempts of each delivery ("webhook_attempts"), as the API and
 * retention see it: written with the event, read, listed, re-sent by hand, pruned. The worker's side (claims and
 * leases) is src/store/sql/webhook-claim-repository.ts. Part of the webhook repository
 * (src/store/sql/webhook-repository.ts); every statement runs on the executor it is given.
 */

export class SqlWebhookDeliveryRepository {
  constructor(
    private readonly provider: DatabaseProvider,
    /** Runs every statement: the driver, or the transaction of the unit of work that built this repository. */
    private readonly sql: SqlExecutor,
  ) {}

  async insertDeliveries(deliveries: readonly WebhookDelivery[]): Promise<void> {
    const ordered = deliveries.filter((delivery) => delivery.orderingKey !== null);
    if (this.provider === "postgres" && ordered.length > 1) {
      // Several references' orders: their locks in one sorted order before any row takes one (lock order).
      await this.sql.all(
        lockOrdersInSortedOrder(
          Prisma.sql`SELECT * FROM (VALUES ${Prisma.join(
            ordered.map((d) => Prisma.sql`(CAST(${d.endpointId} AS TEXT), CAST(${d.orderingKey} AS TEXT))`),
          )}) v ("endpoint_id", "ordering_key")`,
        ),
      );
    }
    // One multi-row INSERT per chunk of parameters (one chunk for any realistic number of endpoints).
    for (const chunk of chunksOf(deliveries, 15)) {
      await this.sql.run(Prisma.sql`
        INSERT INTO "webhook_deliveries" ("id", "organization_id", "endpoint_id", "event_id", "event_type", "body",
          "status", "attempt_count", "next_attempt_at", "lease_owner", "lease_expires_at", "created_at", "updated_at",
          "ordering_key", "event_occurred_at", "attempts_since_queued")
        VALUES ${Prisma.join(
          chunk.map(
            (d) => Prisma.sql`(${d.id}, ${d.organizationId}, ${d.endpointId}, ${d.eventId}, ${d.eventType}, ${d.body},
              ${d.status}, ${d.attemptCount}, ${d.nextAttemptAt}, ${d.leaseOwner}, ${d.leaseExpiresAt}, ${d.createdAt},
              ${d.updatedAt}, ${d.orderingKey}, ${d.eventOccurredAt}, ${d.attemptsSinceQueued})`,
          ),
        )}`);
    }
  }

  async findDelivery(organizationId: string, id: string): Promise<WebhookDeliveryView | null> {
    const [row] = await this.sql.all<DeliveryViewColumns>(Prisma.sql`
      SELECT ${DELIVERY_VIEW_COLUMNS} FROM "webhook_deliveries" d ${DELIVERY_VIEW_JOINS}
      WHERE d."id" = ${id} AND d."organization_id" = ${organizationId}`);
    return row ? toDeliveryViewFromColumns(row) : null;
  }

  async findDeliveriesByIds(organizationId: string, ids: readonly string[]): Promise<WebhookDeliveryView[]> {
    if (ids.length === 0) return [];
    const rows = await findInChunks(ids, (chunk) =>
      this.sql.all<DeliveryViewColumns>(Prisma.sql`
        SELECT ${DELIVERY_VIEW_COLUMNS} FROM "webhook_deliveries" d ${DELIVERY_VIEW_JOINS}
        WHERE d."organization_id" = ${organizationId} AND ${isOneOf(this.provider, Prisma.sql`d."id"`, chunk)}`),
    );
    return rows.map((row) => toDeliveryViewFromColumns(row));
  }

  async listDeliveries(query: DeliveryListQuery): Promise<WebhookDeliveryView[]> {
    const status = query.status ? Prisma.sql`AND d."status" = ${query.status}` : Prisma.empty;
    const before = query.beforeId ? Prisma.sql`AND d."id" < ${query.beforeId}` : Prisma.empty;
    const rows = await this.sql.all<DeliveryViewColumns>(Prisma.sql`
      SELECT ${DELIVERY_VIEW_COLUMNS} FROM "webhook_deliveries" d ${DELIVERY_VIEW_JOINS}
      WHERE d."endpoint_id" = ${query.endpointId} ${status} ${before}
      ORDER BY d."id" DESC LIMIT ${literalLimit(query.limit)}`);
    return rows.map((row) => toDeliveryViewFromColumns(row));
  }

  async findAttemptsByIds(organizationId: string, ids: readonly string[]): Promise<WebhookAttempt[]> {
    if (ids.length === 0) return [];
    const rows = await findInChunks(ids, (chunk) =>
      this.sql.all<AttemptColumns>(Prisma.sql`
        SELECT ${ATTEMPT_COLUMNS} FROM "webhook_attempts" a
        JOIN "webhook_deliveries" d ON d."id" = a."delivery_id"
        WHERE ${isOneOf(this.provider, Prisma.sql`a."id"`, chunk)} AND d."organization_id" = ${organizationId}`),
    );
    return rows.map(toAttemptFromColumns);
  }

  async findAttemptsByDeliveryIds(deliveryIds: readonly string[]): Promise<Map<string, WebhookAttempt[]>> {
    const byDelivery = new Map<string, WebhookAttempt[]>(deliveryIds.map((id) => [id, []]));
    if (deliveryIds.length === 0) return byDelivery;
    const rows = await findInChunks(deliveryIds, (chunk) =>
      this.sql.all<AttemptColumns>(Prisma.sql`
        SELECT ${ATTEMPT_COLUMNS} FROM "webhook_attempts" a
        WHERE ${isOneOf(this.provider, Prisma.sql`a."delivery_id"`, chunk)}
        ORDER BY a."attempted_at", a."id"`),
    );
    for (const row of rows) byDelivery.get(row.delivery_id)?.push(toAttemptFromColumns(row));
    return byDelivery;
  }

  async requeueDelivery(id: string, at: Date): Promise<WebhookDelivery | null> {
    // The retry schedule starts again from its first step; attempt_count goes on counting (it is every attempt
    // of the delivery). The lease is dropped too: a request still in flight then records its attempt without
    // overriding the re-send, which goes out on its own. On an ordered endpoint the re-send keeps its reference's
    // order: it goes out before the later deliveries of its reference still pending, and holds them back.
    const [row] = await this.sql.all<DeliveryColumns>(Prisma.sql`
      UPDATE "webhook_deliveries" SET "status" = 'pending', "attempts_since_queued" = 0, "next_attempt_at" = ${at},
        "lease_owner" = NULL, "lease_expires_at" = NULL, "updated_at" = ${at}, "dropped_reason" = NULL,
        "ordering_key" = ${orderingKeyWhenSentAgain(this.provider)}
      WHERE "id" = ${id}
      RETURNING ${DELIVERY_COLUMNS}`);
    return row ? toDeliveryFromColumns(row) : null;
  }

  deleteSucceededDeliveriesBefore(cutoff: Date, batchSize: number): Promise<number> {
    // One bounded batch on both databases (neither has DELETE ... LIMIT by default), found through the
    // (status, updated_at) index; a delivery re-sent meanwhile is no longer "succeeded" and stays. Attempts go
    // with their delivery (ON DELETE CASCADE).
    return this.sql.run(Prisma.sql`
      DELETE FROM "webhook_deliveries" WHERE "status" = 'succeeded' AND "id" IN (
        SELECT "id" FROM "webhook_deliveries" WHERE "status" = 'succeeded' AND "updated_at" < ${cutoff}
        LIMIT ${literalLimit(batchSize)})`);
  }

  async countPendingDeliveries(): Promise<number> {
    const [row] = await this.sql.all<{ n: number | bigint }>(Prisma.sql`
      SELECT COUNT(*) AS "n" FROM "webhook_deliveries" WHERE "status" = 'pending'`);
    return Number(row?.n ?? 0);
  }
}
