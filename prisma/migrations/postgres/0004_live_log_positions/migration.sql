-- Live log positions (docs/decisions.md, "Subscriptions"): live subscriptions read the log in an order that no
-- still-running transaction can precede. Each event stores the id of the transaction that wrote it
-- ("transaction_id", pg_current_xact_id()) and a number from a sequence ("position"). Readers order by
-- (transaction_id, position) and read only below the horizon, the oldest transaction of this database still
-- running: every transaction below it has finished, so nothing can ever appear there again. Both columns have
-- database defaults, so any code that inserts an event fills them.

CREATE SEQUENCE "lifecycle_events_position_seq" AS BIGINT;

ALTER TABLE "lifecycle_events" ADD COLUMN "position" BIGINT, ADD COLUMN "transaction_id" BIGINT;

-- Events written before this migration: one finished "transaction" 0, in the log's (occurred_at, id) order.
UPDATE "lifecycle_events" SET "position" = ranked."number", "transaction_id" = 0
FROM (SELECT "id", ROW_NUMBER() OVER (ORDER BY "occurred_at", "id") AS "number" FROM "lifecycle_events") AS ranked
WHERE ranked."id" = "lifecycle_events"."id";

SELECT setval('"lifecycle_events_position_seq"', COALESCE((SELECT MAX("position") FROM "lifecycle_events"), 0) + 1, false);

ALTER TABLE "lifecycle_events"
    ALTER COLUMN "position" SET DEFAULT nextval('"lifecycle_events_position_seq"'),
    ALTER COLUMN "position" SET NOT NULL,
    ALTER COLUMN "transaction_id" SET DEFAULT (pg_current_xact_id()::text::bigint),
    ALTER COLUMN "transaction_id" SET NOT NULL;
ALTER SEQUENCE "lifecycle_events_position_seq" OWNED BY "lifecycle_events"."position";

CREATE UNIQUE INDEX "lifecycle_events_transaction_id_position_key" ON "lifecycle_events"("transaction_id", "position");
CREATE INDEX "lifecycle_events_organization_id_transaction_id_position_idx" ON "lifecycle_events"("organization_id", "transaction_id", "position");
CREATE INDEX "lifecycle_events_reference_id_transaction_id_position_idx" ON "lifecycle_events"("reference_id", "transaction_id", "position");

-- Pruning succeeded webhook deliveries past WEBHOOK_DELIVERY_RETENTION finds them by status and last change.
CREATE INDEX "webhook_deliveries_status_updated_at_idx" ON "webhook_deliveries"("status", "updated_at");
