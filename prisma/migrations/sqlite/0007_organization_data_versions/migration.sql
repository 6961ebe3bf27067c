-- Organization data versions, the key of the read cache (docs/decisions.md, "Read cache"). Every commit that
-- changes what a cached read can show (tags, references, their tags, their updates, the lifecycle log) raises its
-- organization's version in the same transaction, by trigger: whatever code or process writes, the version moves
-- with the data. Authentication reads the version before any data; a cached response is served only under the
-- version it was computed after, so it can never be older than the last commit the request could see.
-- SQLite has one writer at a time: a plain row trigger is exact. Log rows are never updated (their position is
-- set by the trigger of migration 0004 in the inserting statement), so they have no UPDATE trigger.
-- No foreign key: rows of a deleted organization's data fire while it goes; a version row left behind is harmless.

CREATE TABLE "organization_data_versions" (
    "organization_id" TEXT NOT NULL PRIMARY KEY,
    "version" BIGINT NOT NULL
);

CREATE TRIGGER "tags_insert_data_version" AFTER INSERT ON "tags" BEGIN
    INSERT INTO "organization_data_versions" ("organization_id", "version") VALUES (NEW."organization_id", 1)
    ON CONFLICT ("organization_id") DO UPDATE SET "version" = "version" + 1;
END;

CREATE TRIGGER "tags_update_data_version" AFTER UPDATE ON "tags" BEGIN
    INSERT INTO "organization_data_versions" ("organization_id", "version") VALUES (NEW."organization_id", 1)
    ON CONFLICT ("organization_id") DO UPDATE SET "version" = "version" + 1;
END;

CREATE TRIGGER "tags_delete_data_version" AFTER DELETE ON "tags" BEGIN
    INSERT INTO "organization_data_versions" ("organization_id", "version") VALUES (OLD."organization_id", 1)
    ON CONFLICT ("organization_id") DO UPDATE SET "version" = "version" + 1;
END;

CREATE TRIGGER "shipping_references_insert_data_version" AFTER INSERT ON "shipping_references" BEGIN
    INSERT INTO "organization_data_versions" ("organization_id", "version") VALUES (NEW."organization_id", 1)
    ON CONFLICT ("organization_id") DO UPDATE SET "version" = "version" + 1;
END;

CREATE TRIGGER "shipping_references_update_data_version" AFTER UPDATE ON "shipping_references" BEGIN
    INSERT INTO "organization_data_versions" ("organization_id", "version") VALUES (NEW."organization_id", 1)
    ON CONFLICT ("organization_id") DO UPDATE SET "version" = "version" + 1;
END;

CREATE TRIGGER "shipping_references_delete_data_version" AFTER DELETE ON "shipping_references" BEGIN
    INSERT INTO "organization_data_versions" ("organization_id", "version") VALUES (OLD."organization_id", 1)
    ON CONFLICT ("organization_id") DO UPDATE SET "version" = "version" + 1;
END;

CREATE TRIGGER "lifecycle_events_insert_data_version" AFTER INSERT ON "lifecycle_events" BEGIN
    INSERT INTO "organization_data_versions" ("organization_id", "version") VALUES (NEW."organization_id", 1)
    ON CONFLICT ("organization_id") DO UPDATE SET "version" = "version" + 1;
END;

CREATE TRIGGER "lifecycle_events_delete_data_version" AFTER DELETE ON "lifecycle_events" BEGIN
    INSERT INTO "organization_data_versions" ("organization_id", "version") VALUES (OLD."organization_id", 1)
    ON CONFLICT ("organization_id") DO UPDATE SET "version" = "version" + 1;
END;

CREATE TRIGGER "reference_updates_insert_data_version" AFTER INSERT ON "reference_updates" BEGIN
    INSERT INTO "organization_data_versions" ("organization_id", "version") VALUES (NEW."organization_id", 1)
    ON CONFLICT ("organization_id") DO UPDATE SET "version" = "version" + 1;
END;

CREATE TRIGGER "reference_updates_delete_data_version" AFTER DELETE ON "reference_updates" BEGIN
    INSERT INTO "organization_data_versions" ("organization_id", "version") VALUES (OLD."organization_id", 1)
    ON CONFLICT ("organization_id") DO UPDATE SET "version" = "version" + 1;
END;

-- A reference's tags carry no organization id: it is the reference's. When the reference itself is being deleted,
-- its own trigger has raised the version already.
CREATE TRIGGER "reference_tags_insert_data_version" AFTER INSERT ON "reference_tags" BEGIN
    INSERT INTO "organization_data_versions" ("organization_id", "version")
    SELECT r."organization_id", 1 FROM "shipping_references" r WHERE r."id" = NEW."reference_id"
    ON CONFLICT ("organization_id") DO UPDATE SET "version" = "version" + 1;
END;

CREATE TRIGGER "reference_tags_delete_data_version" AFTER DELETE ON "reference_tags" BEGIN
    INSERT INTO "organization_data_versions" ("organization_id", "version")
    SELECT r."organization_id", 1 FROM "shipping_references" r WHERE r."id" = OLD."reference_id"
    ON CONFLICT ("organization_id") DO UPDATE SET "version" = "version" + 1;
END;
