-- Commit-ordered live positions on PostgreSQL (docs/decisions.md, "Subscriptions"). Migration 0004 ordered live
-- subscriptions by the writing transaction's id and read only below the oldest transaction still running, so an
-- event waited for every older writer to finish: as long as a whole concurrent request (tens of milliseconds under
-- load). Here each transaction that writes events takes its place in the live order *when it commits*:
--
-- - A deferred constraint trigger runs at COMMIT, after the transaction's last statement, inside the server. It
--   takes a transaction-level advisory lock and inserts one row per (transaction, organization) into
--   "lifecycle_commits" with the next number of "lifecycle_commits_position_seq".
-- - PostgreSQL releases a transaction's locks only after the commit is visible to new snapshots. So the
--   transaction that takes the next number does so after the previous one is visible: numbers become visible
--   in increasing order, and a reader that sees number N sees every committed number below it. Readers need no
--   horizon: whatever they see is final. (A transaction that fails after taking a number leaves a gap; gaps are
--   harmless, nobody waits for a number.)
-- - The lock covers only the server-side end of COMMIT (the trigger and the WAL flush), not the client's round
--   trips: commits of event-writing transactions are serialized, writers are not.
-- - The same trigger sends the commit signal: NOTIFY on "reftrail_lifecycle_events" with the organization id,
--   delivered by PostgreSQL when (and only if) the transaction commits, to every listening instance. So whatever
--   process writes an event, every instance is woken at once, with no statement after the commit.
--
-- An event's live position is ("lifecycle_commits"."position", "lifecycle_events"."position"): its transaction's
-- number in its organization, then its order inside the transaction. The table is read with raw SQL only (like
-- SQLite's "lifecycle_log_sequence"), so it is not part of the Prisma schema. SQLite needs none of this: it has
-- one writer at a time, and its positions are in commit order already (migration 0004).

CREATE SEQUENCE "lifecycle_commits_position_seq" AS BIGINT;

CREATE TABLE "lifecycle_commits" (
    "position" BIGINT NOT NULL PRIMARY KEY,
    "organization_id" TEXT NOT NULL,
    "transaction_id" BIGINT NOT NULL
);
CREATE UNIQUE INDEX "lifecycle_commits_transaction_id_organization_id_key" ON "lifecycle_commits"("transaction_id", "organization_id");
CREATE INDEX "lifecycle_commits_organization_id_position_idx" ON "lifecycle_commits"("organization_id", "position");

-- Events written before this migration keep the order they had: by transaction id (all have committed).
INSERT INTO "lifecycle_commits" ("position", "organization_id", "transaction_id")
SELECT ROW_NUMBER() OVER (ORDER BY "transaction_id", "organization_id"), "organization_id", "transaction_id"
FROM (SELECT DISTINCT "transaction_id", "organization_id" FROM "lifecycle_events") AS committed;

SELECT setval('"lifecycle_commits_position_seq"', COALESCE((SELECT MAX("position") FROM "lifecycle_commits"), 0) + 1, false);

CREATE FUNCTION "lifecycle_events_order_commit"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM "lifecycle_commits"
                   WHERE "transaction_id" = NEW."transaction_id" AND "organization_id" = NEW."organization_id") THEN
        -- Held until this transaction has ended (see above). A key pair: its space is apart from one-key locks.
        PERFORM pg_advisory_xact_lock(727, 4);
        INSERT INTO "lifecycle_commits" ("position", "organization_id", "transaction_id")
        VALUES (nextval('"lifecycle_commits_position_seq"'), NEW."organization_id", NEW."transaction_id");
        PERFORM pg_notify('reftrail_lifecycle_events', NEW."organization_id");
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER "lifecycle_events_order_commit" AFTER INSERT ON "lifecycle_events"
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "lifecycle_events_order_commit"();

-- Retention and organization deletion remove events; a commit row goes with the last event of its transaction.
CREATE FUNCTION "lifecycle_events_forget_commits"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM "lifecycle_commits" c
    USING (SELECT DISTINCT "transaction_id", "organization_id" FROM removed) AS gone
    WHERE c."transaction_id" = gone."transaction_id" AND c."organization_id" = gone."organization_id"
      AND NOT EXISTS (SELECT 1 FROM "lifecycle_events" e
                      WHERE e."organization_id" = c."organization_id" AND e."transaction_id" = c."transaction_id");
    RETURN NULL;
END
$$;

CREATE TRIGGER "lifecycle_events_forget_commits" AFTER DELETE ON "lifecycle_events"
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION "lifecycle_events_forget_commits"();
