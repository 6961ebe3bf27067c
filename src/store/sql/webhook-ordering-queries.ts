import type { DatabaseProvider } from "../database.ts";
import { Prisma } from "./sql-template.ts";

/*
 * Ordered delivery per reference, decided by the database (docs/decisions.md, "Webhook ordering"). A delivery
 * with an `ordering_key` may be leased only while no earlier delivery of the same endpoint and key is pending
 * (waiting for its first attempt or a retry, or in flight). "Earlier" is the log's order, (event_occurred_at,
 * event_id). The claim reads this as the delivery's `held` flag, kept by triggers (migration 0014); the predicate
 * below asks it row by row, for the held-back summary. The partial index "webhook_deliveries_pending_order_idx"
 * (migration 0008) answers it from the pending ordered rows alone.
 */

/** True for the row `alias` of "webhook_deliveries" when nothing ahead of it in its reference's order is pending. */
export function pendingPredecessorIsAbsent(alias: string): Prisma.Sql {
  const row = Prisma.raw(`"${alias}"`);
  return Prisma.sql`(${row}."ordering_key" IS NULL OR NOT EXISTS (
    SELECT 1 FROM "webhook_deliveries" earlier
    WHERE earlier."endpoint_id" = ${row}."endpoint_id" AND earlier."ordering_key" = ${row}."ordering_key"
      AND earlier."status" = 'pending'
      AND (earlier."event_occurred_at" < ${row}."event_occurred_at"
        OR (earlier."event_occurred_at" = ${row}."event_occurred_at" AND earlier."event_id" < ${row}."event_id"))))`;
}

/**
 * The `ordering_key` of a row of "webhook_deliveries" sent again (re-send, recovery): its event's reference when
 * its endpoint is ordered, else NULL (test events have no reference). With the key, the row takes its place in
 * its reference's order again (migration 0014's triggers): it waits behind an earlier pending delivery and holds
 * back the later ones that are pending, so it goes out before them; with none of those, it goes out at once.
 */
export function orderingKeyWhenSentAgain(provider: DatabaseProvider): Prisma.Sql {
  return Prisma.sql`(SELECT e."reference_id" FROM "lifecycle_events" e
    JOIN "webhook_endpoints" w ON w."id" = "webhook_deliveries"."endpoint_id" AND w."ordering" = 'reference'
    WHERE ${eventOfDelivery(provider)})`;
}

/**
 * The row `e` of "lifecycle_events" is the event of the "webhook_deliveries" row being written. On PostgreSQL the
 * log's ids are indexed as uuid values (migration 0016), so they are compared as such; event ids are UUIDs (test
 * events' included).
 */
export function eventOfDelivery(provider: DatabaseProvider): Prisma.Sql {
  return provider === "postgres"
    ? Prisma.sql`e."id"::uuid = CAST("webhook_deliveries"."event_id" AS UUID)`
    : Prisma.sql`e."id" = "webhook_deliveries"."event_id"`;
}

/**
 * PostgreSQL: takes the order locks of the (endpoint, ordering key) pairs that `pairs` selects (columns
 * "endpoint_id", "ordering_key"; rows without a key are left out), each once, in one sorted order: by the lock's
 * key. The triggers of migration 0014 take the same transaction-scoped advisory lock per row they write, in the
 * order the statement writes its rows; a statement writing several references' deliveries (an outbox insert, an
 * outcome batch, a disable) takes them all here first, so that two such statements never wait for each other in a
 * cycle (the triggers then find them held). See the lock order in src/store/sql/sql-store.ts.
 */
export function lockOrdersInSortedOrder(pairs: Prisma.Sql): Prisma.Sql {
  // DISTINCT keeps the sorted subquery from being pulled up: the aggregate locks its rows in their sorted order.
  return Prisma.sql`SELECT COUNT(pg_advisory_xact_lock(s."key")) AS "locked" FROM (
      SELECT DISTINCT hashtextextended('webhook order ' || o."endpoint_id" || ' ' || o."ordering_key", 0) AS "key"
      FROM (${pairs}) o WHERE o."ordering_key" IS NOT NULL ORDER BY "key"
    ) s`;
}
