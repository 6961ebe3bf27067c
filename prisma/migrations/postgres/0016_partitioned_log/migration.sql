-- The lifecycle log partitioned by month (docs/decisions.md, "The log partitioned by month").
--
-- - "lifecycle_events" is range-partitioned on "occurred_at", one partition per calendar month (UTC, as stored),
--   and has no default partition. Retention drops whole months (src/store/sql/log-months.ts): fast whatever the
--   log's size, and the space goes back to the file system at once, where a DELETE cost a scan, the WAL of every
--   row and a vacuum. The rows of the month that straddles the cutoff stay until that month is wholly past; reads
--   hide them as before.
-- - Partitions are found by their bounds, never by their names: a partition made by hand or by another tool as
--   `CREATE TABLE … PARTITION OF "lifecycle_events" FOR VALUES FROM (month start) TO (next month start)` is a month
--   like the others. "lifecycle_events_months"() lists them; "lifecycle_events_ensure_month"(t) makes the month of
--   t when no partition covers any of it, as a table of its own attached to the log (ATTACH takes SHARE UPDATE
--   EXCLUSIVE on the log, which neither writers nor readers conflict with; CREATE … PARTITION OF would take ACCESS
--   EXCLUSIVE and queue every statement behind the longest read). The application makes months ahead at start and
--   at every prune, and the month of an event whose month is missing on demand (lifecycle-repository.ts).
-- - A partitioned table's primary key and unique indexes must hold the partition key, and a key of
--   (id, occurred_at) would check nothing the id's generator does not already guarantee (UUIDv7, made by the
--   application): the log has no primary key, and an event's id is found through an index of its own.
-- - The index set earns its bytes (issue 36): 7 indexes before, 4 now, and the ids in them as 16-byte uuid values
--   rather than 37-byte text (expression indexes on `::uuid`; the statements compare the same expressions). The
--   ids are UUIDs (the application makes them; an id that is not one makes its INSERT fail here). A uuid sorts as
--   its lowercase text does, so the log's (occurred_at, id) order is unchanged.
--     (reference_id, occurred_at, id)    a reference's pages, in either order, by type, after a cursor;
--     (organization_id, occurred_at, id) an organization's log by time: webhook replay, the oldest visible event;
--     (transaction_id, position)         the live order: a commit's events (live-log-store.ts) — narrower than
--                                        (organization_id, transaction_id, position), whose organization the
--                                        commit row fixes anyway (a transaction's events are checked on the row);
--     (id)                               point reads by id (node(id), subscriptions resumed after an event, the
--                                        event of a webhook delivery sent again); UUIDv7 ids arrive in order, so
--                                        this index fills its pages.
--   Dropped: (occurred_at) (retention drops months), (transaction_id, position) unique (it checked what the
--   sequence guarantees), (organization_id, transaction_id, position) and (reference_id, transaction_id, position)
--   (no statement reads by them any more).
-- - Live order: a commit row ("lifecycle_commits") now carries the span of "occurred_at" of its events, so that
--   the live feed's join reads only the partitions of that span (run-time partition pruning), not one index probe
--   per partition for every commit. The commit trigger takes it from the transaction's own rows at COMMIT, once
--   per (transaction, organization), before it takes the commit-order lock. Commit rows of dropped months are
--   deleted by the prune (by "last_occurred_at").
--
-- Existing events are copied into the new table inside this migration's transaction: the log is locked against
-- writes and reads for the copy (about a minute per 10^6 events on 2 cores; README, "Upgrading to the partitioned
-- log"). Positions and transaction ids are copied as they are, so live cursors stay valid.

ALTER TABLE "lifecycle_events" RENAME TO "lifecycle_events_unpartitioned";
ALTER SEQUENCE "lifecycle_events_position_seq" OWNED BY NONE;

CREATE TABLE "lifecycle_events" (
    "id" TEXT NOT NULL,
    "organization_id" TEXT NOT NULL,
    "reference_id" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "occurred_at" TIMESTAMP(3) NOT NULL,
    "detail" JSONB NOT NULL,
    "reference_tags" JSONB NOT NULL,
    "position" BIGINT NOT NULL DEFAULT nextval('"lifecycle_events_position_seq"'),
    "transaction_id" BIGINT NOT NULL DEFAULT (pg_current_xact_id()::text::bigint)
) PARTITION BY RANGE ("occurred_at");
ALTER SEQUENCE "lifecycle_events_position_seq" OWNED BY "lifecycle_events"."position";

-- The log's partitions with their bounds, read from the catalog (a range partition's bound, as PostgreSQL prints
-- it: FOR VALUES FROM ('2026-11-01 00:00:00') TO ('2026-12-01 00:00:00')). A partition bounded by MINVALUE or
-- MAXVALUE has NULL there. "detach_pending": a DETACH … CONCURRENTLY that did not finish (the prune finishes it).
CREATE FUNCTION "lifecycle_events_months"()
RETURNS TABLE ("partition" regclass, "starts_at" TIMESTAMP(3), "ends_at" TIMESTAMP(3), "detach_pending" BOOLEAN)
LANGUAGE sql STABLE AS $$
    SELECT i."inhrelid"::regclass, bounds[1]::timestamp(3), bounds[2]::timestamp(3), i."inhdetachpending"
    FROM pg_catalog.pg_inherits i
    JOIN pg_catalog.pg_class c ON c."oid" = i."inhrelid",
    LATERAL regexp_match(pg_catalog.pg_get_expr(c."relpartbound", c."oid"),
        '^FOR VALUES FROM \(''([^'']*)''\) TO \(''([^'']*)''\)$') AS bounds
    WHERE i."inhparent" = '"lifecycle_events"'::regclass
$$;

-- Makes the month (UTC, as stored) of `instant` a partition of the log unless a partition already covers part of
-- it; true when it made one. Serialized by an advisory lock among the application's instances; a partition made
-- meanwhile by anyone else makes ATTACH fail on the overlap, which is then a month that exists.
CREATE FUNCTION "lifecycle_events_ensure_month"("instant" TIMESTAMP(3)) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
DECLARE
    starts TIMESTAMP(3) := date_trunc('month', "instant");
    ends TIMESTAMP(3) := date_trunc('month', "instant") + interval '1 month';
    name TEXT := 'lifecycle_events_' || to_char(date_trunc('month', "instant"), '"y"YYYY"m"MM');
BEGIN
    PERFORM pg_advisory_xact_lock(727, 16);
    IF EXISTS (SELECT 1 FROM "lifecycle_events_months"() m WHERE m."starts_at" < ends AND m."ends_at" > starts) THEN
        RETURN false;
    END IF;
    WHILE to_regclass(format('%I', name)) IS NOT NULL LOOP
        name := name || '_';
    END LOOP;
    BEGIN
        EXECUTE format('CREATE TABLE %I (LIKE "lifecycle_events" INCLUDING DEFAULTS)', name);
        EXECUTE format('ALTER TABLE "lifecycle_events" ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
            name, starts, ends);
    EXCEPTION WHEN invalid_object_definition THEN
        IF EXISTS (SELECT 1 FROM "lifecycle_events_months"() m WHERE m."starts_at" < ends AND m."ends_at" > starts) THEN
            RETURN false;
        END IF;
        RAISE;
    END;
    RETURN true;
END
$$;

-- Every month of the existing events, and from last month to two months ahead.
SELECT "lifecycle_events_ensure_month"("month")
FROM generate_series(
    date_trunc('month', LEAST((SELECT MIN("occurred_at") FROM "lifecycle_events_unpartitioned"),
        (now() AT TIME ZONE 'UTC') - interval '1 month')),
    date_trunc('month', GREATEST((SELECT MAX("occurred_at") FROM "lifecycle_events_unpartitioned"),
        (now() AT TIME ZONE 'UTC') + interval '2 months')),
    interval '1 month') AS "month";

INSERT INTO "lifecycle_events" ("id", "organization_id", "reference_id", "type", "occurred_at", "detail",
    "reference_tags", "position", "transaction_id")
SELECT "id", "organization_id", "reference_id", "type", "occurred_at", "detail", "reference_tags", "position",
    "transaction_id"
FROM "lifecycle_events_unpartitioned";

-- The span of each commit's events; a commit row whose events are all gone goes.
ALTER TABLE "lifecycle_commits" ADD COLUMN "first_occurred_at" TIMESTAMP(3), ADD COLUMN "last_occurred_at" TIMESTAMP(3);
UPDATE "lifecycle_commits" c SET "first_occurred_at" = spans."first", "last_occurred_at" = spans."last"
FROM (SELECT "organization_id", "transaction_id", MIN("occurred_at") AS "first", MAX("occurred_at") AS "last"
      FROM "lifecycle_events_unpartitioned" GROUP BY "organization_id", "transaction_id") AS spans
WHERE spans."organization_id" = c."organization_id" AND spans."transaction_id" = c."transaction_id";
DELETE FROM "lifecycle_commits" WHERE "first_occurred_at" IS NULL;
ALTER TABLE "lifecycle_commits" ALTER COLUMN "first_occurred_at" SET NOT NULL,
    ALTER COLUMN "last_occurred_at" SET NOT NULL;
CREATE INDEX "lifecycle_commits_last_occurred_at_idx" ON "lifecycle_commits"("last_occurred_at");

DROP TABLE "lifecycle_events_unpartitioned";

-- Built once the rows are in: one sort per index and partition rather than an insert per row.
CREATE INDEX "lifecycle_events_reference_id_occurred_at_id_idx" ON "lifecycle_events"(("reference_id"::uuid), "occurred_at", ("id"::uuid));
CREATE INDEX "lifecycle_events_organization_id_occurred_at_id_idx" ON "lifecycle_events"(("organization_id"::uuid), "occurred_at", ("id"::uuid));
CREATE INDEX "lifecycle_events_transaction_id_position_idx" ON "lifecycle_events"("transaction_id", "position");
CREATE INDEX "lifecycle_events_id_idx" ON "lifecycle_events"(("id"::uuid));

-- Migration 0006's commit numbering, with the span of the commit's events. Computed before the lock is taken, so
-- the time the commit order is held does not grow; the transaction's statements have all run (this trigger is
-- deferred to COMMIT), so the span is whole.
CREATE OR REPLACE FUNCTION "lifecycle_events_order_commit"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    first_at TIMESTAMP(3);
    last_at TIMESTAMP(3);
BEGIN
    IF NOT EXISTS (SELECT 1 FROM "lifecycle_commits"
                   WHERE "transaction_id" = NEW."transaction_id" AND "organization_id" = NEW."organization_id") THEN
        SELECT MIN("occurred_at"), MAX("occurred_at") INTO first_at, last_at FROM "lifecycle_events"
        WHERE "transaction_id" = NEW."transaction_id" AND "organization_id" = NEW."organization_id";
        -- Held until this transaction has ended (migration 0006). A key pair: its space is apart from one-key locks.
        PERFORM pg_advisory_xact_lock(727, 4);
        INSERT INTO "lifecycle_commits" ("position", "organization_id", "transaction_id", "first_occurred_at",
            "last_occurred_at")
        VALUES (nextval('"lifecycle_commits_position_seq"'), NEW."organization_id", NEW."transaction_id",
            COALESCE(first_at, NEW."occurred_at"), COALESCE(last_at, NEW."occurred_at"));
        PERFORM pg_notify('reftrail_lifecycle_events', NEW."organization_id");
    END IF;
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER "lifecycle_events_order_commit" AFTER INSERT ON "lifecycle_events"
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "lifecycle_events_order_commit"();

CREATE TRIGGER "lifecycle_events_forget_commits" AFTER DELETE ON "lifecycle_events"
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION "lifecycle_events_forget_commits"();

CREATE CONSTRAINT TRIGGER "lifecycle_events_data_version" AFTER INSERT OR DELETE ON "lifecycle_events"
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "organization_data_changed"();

-- Autovacuum analyzes partitions, never a partitioned table: the statistics of the whole log are taken here
-- (and by the prune, after it changed the months).
ANALYZE "lifecycle_events";
