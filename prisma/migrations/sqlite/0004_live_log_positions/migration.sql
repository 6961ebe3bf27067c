-- Live log positions (docs/decisions.md, "Subscriptions"): every lifecycle event gets a place in commit order,
-- so live subscriptions read the log exactly, with no settle delay. SQLite has one writer at a time: a number
-- taken inside the writing transaction is already in commit order. The counter lives in its own row (not
-- MAX(position) + 1), so numbers are never reused, even after retention has deleted every event.
-- "transaction_id" exists for PostgreSQL's visibility horizon; on SQLite it is always 0.

CREATE TABLE "lifecycle_log_sequence" (
    "id" INTEGER NOT NULL PRIMARY KEY CHECK ("id" = 1),
    "last_position" INTEGER NOT NULL
);

ALTER TABLE "lifecycle_events" ADD COLUMN "position" BIGINT;
ALTER TABLE "lifecycle_events" ADD COLUMN "transaction_id" BIGINT NOT NULL DEFAULT 0;

-- Events written before this migration take their places in the log's (occurred_at, id) order.
UPDATE "lifecycle_events" SET "position" = ranked."number"
FROM (SELECT "id", ROW_NUMBER() OVER (ORDER BY "occurred_at", "id") AS "number" FROM "lifecycle_events") AS ranked
WHERE ranked."id" = "lifecycle_events"."id";

INSERT INTO "lifecycle_log_sequence" ("id", "last_position")
SELECT 1, COALESCE(MAX("position"), 0) FROM "lifecycle_events";

-- Whatever code inserts an event, it gets the next number inside its own transaction.
CREATE TRIGGER "lifecycle_events_assign_position" AFTER INSERT ON "lifecycle_events"
FOR EACH ROW WHEN NEW."position" IS NULL
BEGIN
    UPDATE "lifecycle_log_sequence" SET "last_position" = "last_position" + 1 WHERE "id" = 1;
    UPDATE "lifecycle_events" SET "position" = (SELECT "last_position" FROM "lifecycle_log_sequence" WHERE "id" = 1)
    WHERE "rowid" = NEW."rowid";
END;

CREATE UNIQUE INDEX "lifecycle_events_transaction_id_position_key" ON "lifecycle_events"("transaction_id", "position");
CREATE INDEX "lifecycle_events_organization_id_transaction_id_position_idx" ON "lifecycle_events"("organization_id", "transaction_id", "position");
CREATE INDEX "lifecycle_events_reference_id_transaction_id_position_idx" ON "lifecycle_events"("reference_id", "transaction_id", "position");

-- Pruning succeeded webhook deliveries past WEBHOOK_DELIVERY_RETENTION finds them by status and last change.
CREATE INDEX "webhook_deliveries_status_updated_at_idx" ON "webhook_deliveries"("status", "updated_at");
