-- The claim reads only what it may send (docs/decisions.md, "Webhook claims: heads only, fair shares").
--
-- - "webhook_deliveries"."held": true while an earlier delivery of the same (endpoint, ordering key) is pending, in
--   the log's order (event_occurred_at, event_id). Of each reference's pending deliveries to an ordered endpoint,
--   only the first (its head) is not held: the rows behind it wait outside the claim's index, so a backlog held
--   behind a failing reference costs the claim nothing. Deliveries without an ordering key are never held.
-- - The triggers below keep the flag, whatever statement writes a delivery (the outbox with its event, an attempt's
--   outcome, a re-send, recovery, replay, ordering turned off): a delivery that becomes pending with a key is held
--   when an earlier one of its reference is pending, and holds the later ones; when the head stops being pending
--   (succeeded, given up, re-sent out of order) the earliest pending delivery of its reference becomes the head.
--   Pending deliveries are only deleted with their endpoint, all of them, so no DELETE trigger is needed.
-- - "webhook_deliveries_due_heads_idx": the claim's index. Per endpoint, its deliveries that may be sent, in due
--   order: the claim takes a few per endpoint with work (a fair share), never a scan of a backlog.
-- SQLite has one writer at a time and fires these triggers row by row inside the statement: no locks are needed.
-- The inner UPDATEs write only "held", which fires none of them again.

ALTER TABLE "webhook_deliveries" ADD COLUMN "held" BOOLEAN NOT NULL DEFAULT false;

-- The deliveries pending before this migration: held when an earlier one of their reference is pending.
UPDATE "webhook_deliveries" SET "held" = true
WHERE "status" = 'pending' AND "ordering_key" IS NOT NULL AND EXISTS (
    SELECT 1 FROM "webhook_deliveries" earlier
    WHERE earlier."endpoint_id" = "webhook_deliveries"."endpoint_id"
      AND earlier."ordering_key" = "webhook_deliveries"."ordering_key" AND earlier."status" = 'pending'
      AND (earlier."event_occurred_at" < "webhook_deliveries"."event_occurred_at"
        OR (earlier."event_occurred_at" = "webhook_deliveries"."event_occurred_at"
          AND earlier."event_id" < "webhook_deliveries"."event_id")));

CREATE INDEX "webhook_deliveries_due_heads_idx" ON "webhook_deliveries"("endpoint_id", "next_attempt_at", "id")
    WHERE "status" = 'pending' AND NOT "held";
-- Each reference's head (one row per reference with pending deliveries): what a delivery joining the order holds.
CREATE INDEX "webhook_deliveries_order_heads_idx" ON "webhook_deliveries"("endpoint_id", "ordering_key")
    WHERE "status" = 'pending' AND "ordering_key" IS NOT NULL AND NOT "held";

-- A delivery that becomes pending in a reference's order (inserted, or requeued with a key).
CREATE TRIGGER "webhook_deliveries_join_order" AFTER INSERT ON "webhook_deliveries"
WHEN NEW."status" = 'pending' AND NEW."ordering_key" IS NOT NULL
BEGIN
    UPDATE "webhook_deliveries" SET "held" = EXISTS (
        SELECT 1 FROM "webhook_deliveries" earlier
        WHERE earlier."endpoint_id" = NEW."endpoint_id" AND earlier."ordering_key" = NEW."ordering_key"
          AND earlier."status" = 'pending'
          AND (earlier."event_occurred_at" < NEW."event_occurred_at"
            OR (earlier."event_occurred_at" = NEW."event_occurred_at" AND earlier."event_id" < NEW."event_id")))
    WHERE "id" = NEW."id";
    UPDATE "webhook_deliveries" SET "held" = true
    WHERE "endpoint_id" = NEW."endpoint_id" AND "ordering_key" = NEW."ordering_key" AND "status" = 'pending'
      AND NOT "held"
      AND ("event_occurred_at" > NEW."event_occurred_at"
        OR ("event_occurred_at" = NEW."event_occurred_at" AND "event_id" > NEW."event_id"));
END;

CREATE TRIGGER "webhook_deliveries_rejoin_order" AFTER UPDATE OF "status", "ordering_key" ON "webhook_deliveries"
WHEN NEW."status" = 'pending' AND NEW."ordering_key" IS NOT NULL
    AND NOT (OLD."status" = 'pending' AND OLD."ordering_key" IS NOT NULL AND OLD."ordering_key" = NEW."ordering_key")
BEGIN
    UPDATE "webhook_deliveries" SET "held" = EXISTS (
        SELECT 1 FROM "webhook_deliveries" earlier
        WHERE earlier."endpoint_id" = NEW."endpoint_id" AND earlier."ordering_key" = NEW."ordering_key"
          AND earlier."status" = 'pending'
          AND (earlier."event_occurred_at" < NEW."event_occurred_at"
            OR (earlier."event_occurred_at" = NEW."event_occurred_at" AND earlier."event_id" < NEW."event_id")))
    WHERE "id" = NEW."id";
    UPDATE "webhook_deliveries" SET "held" = true
    WHERE "endpoint_id" = NEW."endpoint_id" AND "ordering_key" = NEW."ordering_key" AND "status" = 'pending'
      AND NOT "held"
      AND ("event_occurred_at" > NEW."event_occurred_at"
        OR ("event_occurred_at" = NEW."event_occurred_at" AND "event_id" > NEW."event_id"));
END;

-- A delivery that stops being pending in its reference's order: the earliest pending one becomes the head; the
-- delivery itself is no longer held (a re-send goes out at once, outside the order).
CREATE TRIGGER "webhook_deliveries_leave_order" AFTER UPDATE OF "status", "ordering_key" ON "webhook_deliveries"
WHEN OLD."status" = 'pending' AND OLD."ordering_key" IS NOT NULL
    AND NOT (NEW."status" = 'pending' AND NEW."ordering_key" IS NOT NULL AND NEW."ordering_key" = OLD."ordering_key")
BEGIN
    UPDATE "webhook_deliveries" SET "held" = false WHERE "id" = NEW."id" AND "held";
    UPDATE "webhook_deliveries" SET "held" = false
    WHERE "held" AND "id" = (
        SELECT next."id" FROM "webhook_deliveries" next
        WHERE next."endpoint_id" = OLD."endpoint_id" AND next."ordering_key" = OLD."ordering_key"
          AND next."status" = 'pending'
        ORDER BY next."event_occurred_at", next."event_id" LIMIT 1);
END;
