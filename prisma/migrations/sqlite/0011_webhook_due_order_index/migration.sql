-- The worker's claim reads due deliveries in (next_attempt_at, id) order. The index it used ended at
-- next_attempt_at, and a transaction's deliveries share that time (they are created together), so every claim
-- sorted each group of equal times by id again. With "id" in the index the rows come in claim order, and the
-- claim stops reading at its limit.

DROP INDEX "webhook_deliveries_status_next_attempt_at_idx";
CREATE INDEX "webhook_deliveries_status_next_attempt_at_id_idx" ON "webhook_deliveries"("status", "next_attempt_at", "id");
