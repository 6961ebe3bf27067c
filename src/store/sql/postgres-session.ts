/**
 * Sent first on every connection of the store (postgres-executor.ts, postgres-read-lanes.ts): settings of the
 * planner for the store's own statements, which are written for indexes that give their order whole.
 *
 * Incremental sort (PostgreSQL 13+: an index gives the leading keys in order, each run of equal leading keys is
 * sorted on the rest) is off. It entered the store's plans only where the planner took such a run for short and
 * it was not: an events page of a reference holding most of the table, planned generically (a prepared statement
 * after five executions), read the whole reference through its (reference_id, transaction_id, position) index
 * and sorted it, 0.5–0.9 s a page against 0.1 ms on 1,000,000 events (lifecycle-repository.ts, `eventPage`;
 * docs/decisions.md, "An events page's plan"). Without incremental sort such a plan needs a full sort, which the
 * planner costs at what it is. A statement rather than a startup option, so that `options` in DATABASE_URL keep
 * working.
 */
export const SESSION_SETTINGS = "SET enable_incremental_sort = off";
