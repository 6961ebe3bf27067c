-- Ordered delivery per reference, recovery and replay (docs/decisions.md, "Webhook ordering").
--
-- - "webhook_endpoints"."ordering": 'none' (deliveries go out as soon as they are due) or 'reference' (the
--   deliveries of one reference's events go out one at a time, in the log's order).
-- - "webhook_deliveries"."ordering_key": the reference whose log order the delivery keeps; NULL for deliveries
--   sent as soon as due (unordered endpoints, test events, re-sends and recoveries).
-- - "webhook_deliveries"."event_occurred_at": the event's time; with "event_id" the event's place in the log
--   ((occurred_at, id) order). Outbox deliveries were created at their event's time, so older rows copy it.
-- - The claim leases an ordered delivery only when no earlier delivery of the same (endpoint, ordering key) is
--   still pending: the partial index below answers that question from the pending rows alone.
-- - Replay finds an event's earlier delivery to the endpoint by (endpoint_id, event_id); recovery scans an
--   endpoint's deliveries by creation time.

ALTER TABLE "webhook_endpoints" ADD COLUMN "ordering" TEXT NOT NULL DEFAULT 'none';

ALTER TABLE "webhook_deliveries" ADD COLUMN "ordering_key" TEXT;
ALTER TABLE "webhook_deliveries" ADD COLUMN "event_occurred_at" DATETIME;
UPDATE "webhook_deliveries" SET "event_occurred_at" = "created_at";

CREATE INDEX "webhook_deliveries_pending_order_idx" ON "webhook_deliveries"("endpoint_id", "ordering_key", "event_occurred_at", "event_id")
    WHERE "status" = 'pending' AND "ordering_key" IS NOT NULL;
CREATE INDEX "webhook_deliveries_endpoint_id_event_id_idx" ON "webhook_deliveries"("endpoint_id", "event_id");
CREATE INDEX "webhook_deliveries_endpoint_id_created_at_idx" ON "webhook_deliveries"("endpoint_id", "created_at");
