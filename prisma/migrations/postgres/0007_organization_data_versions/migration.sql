-- Organization data versions, the key of the read cache (docs/decisions.md, "Read cache"). Every commit that
-- changes what a cached read can show (tags, references, their tags, their updates, the lifecycle log) raises its
-- organization's version in the same transaction, by trigger: whatever code or instance writes, the version moves
-- with the data. Authentication reads the version before any data; a cached response is served only under the
-- version it was computed after, so it can never be older than the last commit the request could see.
--
-- On PostgreSQL the version is raised when the transaction commits, by a deferred constraint trigger, once per
-- (transaction, organization): raised earlier, the version row's lock would serialize every writer of an
-- organization for the whole of its transaction. The trigger first takes the advisory lock that migration 0006
-- takes to number commits, so the row lock is only ever taken under it: commits that change data are serialized
-- for the server-side end of COMMIT (as event-writing ones already were), and the two triggers cannot deadlock.
-- Log rows are never updated (their position is set when inserted), so they have no UPDATE trigger.
-- No foreign key: rows of a deleted organization's data fire while it goes; a version row left behind is harmless.

CREATE TABLE "organization_data_versions" (
    "organization_id" TEXT NOT NULL PRIMARY KEY,
    "version" BIGINT NOT NULL
);

CREATE FUNCTION "organization_data_changed"() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed RECORD;
    organization TEXT;
    raised TEXT := COALESCE(current_setting('reftrail.data_versions_raised', true), '');
BEGIN
    IF TG_OP = 'DELETE' THEN changed := OLD; ELSE changed := NEW; END IF;
    IF TG_TABLE_NAME = 'reference_tags' THEN
        -- A reference's tags carry no organization id: it is the reference's. When the reference itself is
        -- being deleted, its own row has raised the version.
        SELECT r."organization_id" INTO organization FROM "shipping_references" r WHERE r."id" = changed."reference_id";
        IF organization IS NULL THEN RETURN NULL; END IF;
    ELSE
        organization := changed."organization_id";
    END IF;
    -- Once per transaction and organization: bulk writes queue thousands of rows.
    IF strpos(raised, ',' || organization || ',') > 0 THEN RETURN NULL; END IF;
    PERFORM pg_advisory_xact_lock(727, 4);
    INSERT INTO "organization_data_versions" ("organization_id", "version") VALUES (organization, 1)
    ON CONFLICT ("organization_id") DO UPDATE SET "version" = "organization_data_versions"."version" + 1;
    PERFORM set_config('reftrail.data_versions_raised', raised || ',' || organization || ',', true);
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER "tags_data_version" AFTER INSERT OR UPDATE OR DELETE ON "tags"
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "organization_data_changed"();

CREATE CONSTRAINT TRIGGER "shipping_references_data_version" AFTER INSERT OR UPDATE OR DELETE ON "shipping_references"
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "organization_data_changed"();

CREATE CONSTRAINT TRIGGER "lifecycle_events_data_version" AFTER INSERT OR DELETE ON "lifecycle_events"
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "organization_data_changed"();

CREATE CONSTRAINT TRIGGER "reference_updates_data_version" AFTER INSERT OR DELETE ON "reference_updates"
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "organization_data_changed"();

CREATE CONSTRAINT TRIGGER "reference_tags_data_version" AFTER INSERT OR DELETE ON "reference_tags"
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION "organization_data_changed"();
