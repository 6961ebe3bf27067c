-- A delivery's attempt count and its place in the retry schedule are two numbers (docs/decisions.md, "Webhooks").
--
-- - "attempt_count" counts every attempt whose outcome was recorded, for the delivery's whole life: re-sends by
--   hand, recovery and replay no longer reset it, so it matches the attempts the delivery's log lists.
-- - "attempts_since_queued" counts the attempts since the delivery was last (re)queued: the retry schedule is
--   indexed by it, so a re-send, a recovery or a replay starts the schedule from its first step again.
--
-- Until now the two were one column, reset on every requeue, so existing rows copy it.

ALTER TABLE "webhook_deliveries" ADD COLUMN "attempts_since_queued" INTEGER NOT NULL DEFAULT 0;
UPDATE "webhook_deliveries" SET "attempts_since_queued" = "attempt_count";
