-- Each reference keeps its REST representation on its row, as JSON text (docs/decisions.md, "Listings rendered
-- by the database"): a page of references is its rows' texts joined, with nothing parsed, mapped or serialized
-- per row. The database writes the text, by trigger, whenever the row is written, whatever statement or process
-- writes it: tag links change the row's `tag_list` in the same transaction (migration 0009), so the text follows
-- them too. The text is what src/rest/serializers.ts's serializeReference gives for the row, byte for byte; a
-- test compares the two (test/reference-rest-json.test.ts). Changing the representation means a migration that
-- replaces these triggers and rewrites the column.
-- SQLite has no BEFORE trigger that sets a column: an AFTER trigger rewrites the row once more. Triggers do
-- not fire recursively here (recursive_triggers is off), and the inner UPDATE writes only this column. The text
-- is defined once, by the view both triggers read (a lookup by primary key: the view is flattened into it).

ALTER TABLE "shipping_references" ADD COLUMN "rest_json" TEXT NOT NULL DEFAULT '';

CREATE VIEW "shipping_reference_rest_json" AS
SELECT r."id", json_object(
        'id', r."id", 'reference_id', r."id", 'organization_id', r."organization_id",
        'container_id', r."container_id", 'bill_of_lading', r."bill_of_lading", 'booking_number', r."booking_number",
        'carrier_code', r."carrier_code", 'carrier_scac', r."carrier_code", 'parent_reference_id', r."parent_reference_id",
        'active', json(CASE WHEN r."active" THEN 'true' ELSE 'false' END), 'deactivate_reason', r."deactivate_reason",
        'auto_unsubscribed', json(CASE WHEN r."auto_unsubscribed" THEN 'true' ELSE 'false' END),
        'last_update_status', r."last_update_status", 'consecutive_failures', r."consecutive_failures",
        'estimated_departure', strftime('%Y-%m-%dT%H:%M:%fZ', r."estimated_departure"),
        'estimated_arrival', strftime('%Y-%m-%dT%H:%M:%fZ', r."estimated_arrival"),
        'tags', (SELECT json_group_array(json_object('id', t.value ->> 'id', 'name', t.value ->> 'name'))
            FROM json_each(r."tag_list") t),
        'created_at', strftime('%Y-%m-%dT%H:%M:%fZ', r."created_at"),
        'updated_at', strftime('%Y-%m-%dT%H:%M:%fZ', r."updated_at")) AS "rest_json"
FROM "shipping_references" r;

CREATE TRIGGER "shipping_references_insert_rest_json" AFTER INSERT ON "shipping_references" BEGIN
    UPDATE "shipping_references"
    SET "rest_json" = (SELECT v."rest_json" FROM "shipping_reference_rest_json" v WHERE v."id" = NEW."id")
    WHERE "id" = NEW."id";
END;

CREATE TRIGGER "shipping_references_update_rest_json" AFTER UPDATE OF "id", "organization_id", "container_id",
    "bill_of_lading", "booking_number", "carrier_code", "parent_reference_id", "active", "deactivate_reason",
    "auto_unsubscribed", "last_update_status", "consecutive_failures", "estimated_departure", "estimated_arrival",
    "created_at", "updated_at", "tag_list" ON "shipping_references" BEGIN
    UPDATE "shipping_references"
    SET "rest_json" = (SELECT v."rest_json" FROM "shipping_reference_rest_json" v WHERE v."id" = NEW."id")
    WHERE "id" = NEW."id";
END;

-- The rows written before this migration.
UPDATE "shipping_references"
SET "rest_json" = (SELECT v."rest_json" FROM "shipping_reference_rest_json" v WHERE v."id" = "shipping_references"."id");
