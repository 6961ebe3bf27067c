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
-- - Several instances and API requests write one reference's deliveries at once: each change to a reference's
--   order takes a transaction-scoped advisory lock on (endpoint, ordering key) before it looks at the reference's
--   other deliveries, with a fresh snapshot. So an event's delivery written while the head's outcome is being
--   recorded either sees that outcome committed or is seen by it: never a held delivery with no head before it.
-- - "webhook_deliveries_due_heads_idx": the claim's index. Per endpoint, its deliveries that may be sent, in due
--   order: the claim takes a few per endpoint with work (a fair share), never a scan of a backlog.
-- The update trigger runs after the statement's rows are written (it sees all of them); the inner UPDATEs of both
-- write only "held", which fires neither.

ALTER TABLE "webhook_deliveries" ADD COLUMN "held" BOOLEAN NOT NULL DEFAULT false;

-- The deliveries pending before this migration: held when an earlier one of their reference is pending.
UPDATE "webhook_deliveries" d SET "held" = true
WHERE d."status" = 'pending' AND d."ordering_key" IS NOT NULL AND EXISTS (
    SELECT 1 FROM "webhook_deliveries" earlier
    WHERE earlier."endpoint_id" = d."endpoint_id" AND earlier."ordering_key" = d."ordering_key"
      AND earlier."status" = 'pending'
      AND (earlier."event_occurred_at", earlier."event_id") < (d."event_occurred_at", d."event_id"));

CREATE INDEX "webhook_deliveries_due_heads_idx" ON "webhook_deliveries"("endpoint_id", "next_attempt_at", "id")
    WHERE "status" = 'pending' AND NOT "held";
-- Each reference's head (one row per reference with pending deliveries): what a delivery joining the order holds.
CREATE INDEX "webhook_deliveries_order_heads_idx" ON "webhook_deliveries"("endpoint_id", "ordering_key")
    WHERE "status" = 'pending' AND "ordering_key" IS NOT NULL AND NOT "held";

-- A delivery inserted into a reference's order gets its flag before it is written (set afterwards, the row's first
-- version would stay in the claim's index as a dead entry that every claim steps over until vacuum).
CREATE FUNCTION "webhook_deliveries_join_order"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW."status" = 'pending' THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('webhook order ' || NEW."endpoint_id" || ' ' || NEW."ordering_key", 0));
        -- Sees the rows this statement inserted before this one: of one insert, the earliest becomes the head.
        NEW."held" := EXISTS (
            SELECT 1 FROM "webhook_deliveries" earlier
            WHERE earlier."endpoint_id" = NEW."endpoint_id" AND earlier."ordering_key" = NEW."ordering_key"
              AND earlier."status" = 'pending'
              AND (earlier."event_occurred_at", earlier."event_id") < (NEW."event_occurred_at", NEW."event_id"));
        IF NOT NEW."held" THEN
            UPDATE "webhook_deliveries" SET "held" = true
            WHERE "endpoint_id" = NEW."endpoint_id" AND "ordering_key" = NEW."ordering_key" AND "status" = 'pending'
              AND NOT "held" AND ("event_occurred_at", "event_id") > (NEW."event_occurred_at", NEW."event_id");
        END IF;
    END IF;
    RETURN NEW;
END
$$;

-- A delivery updated into or out of a reference's order (an outcome, a re-send, recovery, replay).
CREATE FUNCTION "webhook_deliveries_order_heads"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    was_ordered boolean := OLD."status" = 'pending' AND OLD."ordering_key" IS NOT NULL;
    is_ordered boolean := NEW."status" = 'pending' AND NEW."ordering_key" IS NOT NULL;
BEGIN
    IF was_ordered AND NOT (is_ordered AND NEW."ordering_key" = OLD."ordering_key") THEN
        -- Left its reference's order: no longer held, and the earliest pending delivery is the head.
        PERFORM pg_advisory_xact_lock(hashtextextended('webhook order ' || OLD."endpoint_id" || ' ' || OLD."ordering_key", 0));
        UPDATE "webhook_deliveries" SET "held" = false WHERE "id" = NEW."id" AND "held";
        UPDATE "webhook_deliveries" SET "held" = false
        WHERE "held" AND "id" = (
            SELECT next."id" FROM "webhook_deliveries" next
            WHERE next."endpoint_id" = OLD."endpoint_id" AND next."ordering_key" = OLD."ordering_key"
              AND next."status" = 'pending'
            ORDER BY next."event_occurred_at", next."event_id" LIMIT 1);
    END IF;
    IF is_ordered AND NOT (was_ordered AND NEW."ordering_key" = OLD."ordering_key") THEN
        -- Joined its reference's order: held behind an earlier pending delivery, and holds the later ones.
        PERFORM pg_advisory_xact_lock(hashtextextended('webhook order ' || NEW."endpoint_id" || ' ' || NEW."ordering_key", 0));
        UPDATE "webhook_deliveries" SET "held" = EXISTS (
            SELECT 1 FROM "webhook_deliveries" earlier
            WHERE earlier."endpoint_id" = NEW."endpoint_id" AND earlier."ordering_key" = NEW."ordering_key"
              AND earlier."status" = 'pending'
              AND (earlier."event_occurred_at", earlier."event_id") < (NEW."event_occurred_at", NEW."event_id"))
        WHERE "id" = NEW."id";
        UPDATE "webhook_deliveries" SET "held" = true
        WHERE "endpoint_id" = NEW."endpoint_id" AND "ordering_key" = NEW."ordering_key" AND "status" = 'pending'
          AND NOT "held" AND ("event_occurred_at", "event_id") > (NEW."event_occurred_at", NEW."event_id");
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER "webhook_deliveries_join_order" BEFORE INSERT ON "webhook_deliveries"
    FOR EACH ROW WHEN (NEW."ordering_key" IS NOT NULL) EXECUTE FUNCTION "webhook_deliveries_join_order"();
CREATE TRIGGER "webhook_deliveries_order_heads_update" AFTER UPDATE OF "status", "ordering_key" ON "webhook_deliveries"
    FOR EACH ROW WHEN (OLD."ordering_key" IS NOT NULL OR NEW."ordering_key" IS NOT NULL)
    EXECUTE FUNCTION "webhook_deliveries_order_heads"();
