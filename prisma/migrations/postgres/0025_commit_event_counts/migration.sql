-- Each commit row counts its events (PostgreSQL only: SQLite has no commit rows). The feed's reads take commits in
-- order until their events fill a page (src/store/sql/live-log-store.ts), so that a read touches the commits it
-- needs whatever the planner estimates: the events of one commit are estimated from the product of independent
-- selectivities and came out at one row where there were 500, and a page of 500 was then planned as a sort of
-- every event of the organization after the cursor (185 ms on 100,000 events, issue 49.3). The count is computed
-- with the span the trigger already reads (the same rows, no other statement). Rows written before this
-- migration have none; a read counts them as one event, a lower bound, so it reads more commits than needed and
-- nothing less.
ALTER TABLE "lifecycle_commits" ADD COLUMN "event_count" INTEGER;

CREATE OR REPLACE FUNCTION "lifecycle_events_order_commit"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    first_at TIMESTAMP(3);
    last_at TIMESTAMP(3);
    counted INTEGER;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM "lifecycle_commits"
                   WHERE "transaction_id" = NEW."transaction_id" AND "organization_id" = NEW."organization_id") THEN
        SELECT MIN("occurred_at"), MAX("occurred_at"), COUNT(*) INTO first_at, last_at, counted FROM "lifecycle_events"
        WHERE "transaction_id" = NEW."transaction_id" AND "organization_id" = NEW."organization_id";
        -- Held until this transaction has ended (migration 0006). A key pair: its space is apart from one-key locks.
        PERFORM pg_advisory_xact_lock(727, 4);
        INSERT INTO "lifecycle_commits" ("position", "organization_id", "transaction_id", "first_occurred_at",
            "last_occurred_at", "event_count")
        VALUES (nextval('"lifecycle_commits_position_seq"'), NEW."organization_id", NEW."transaction_id",
            COALESCE(first_at, NEW."occurred_at"), COALESCE(last_at, NEW."occurred_at"), GREATEST(counted, 1));
        PERFORM pg_notify('reftrail_lifecycle_events', NEW."organization_id");
    END IF;
    RETURN NULL;
END
$$;
