-- The lifecycle log's lean index set on SQLite (issue 36; PostgreSQL's log is partitioned by month by its own
-- migration 0016). Two indexes no statement needs any more go:
-- - (occurred_at): retention deletes each organization's expired events through (organization_id, occurred_at,
--   id) (lifecycle-repository.ts, deleteEventsBefore);
-- - (reference_id, transaction_id, position): no statement reads a reference's events in live order.
-- Kept: the primary key (id), (reference_id, occurred_at, id) for pages, (organization_id, occurred_at, id) for
-- replay, authentication and retention, and the live order's (transaction_id, position) and
-- (organization_id, transaction_id, position), which the live reads use with transaction_id = 0 (always 0 here).
-- The file does not grow without bound under a steady log: the pages that pruned rows free go to SQLite's freelist
-- and are reused by the next inserts (auto_vacuum would only hand them back to the file system, at the cost of
-- moving pages at every commit); docs/decisions.md, "The log partitioned by month".
DROP INDEX "lifecycle_events_occurred_at_idx";
DROP INDEX "lifecycle_events_reference_id_transaction_id_position_idx";
