-- Each reference keeps its REST representation on its row, as JSON text (docs/decisions.md, "Listings rendered
-- by the database"): a page of references is its rows' texts joined, with nothing parsed, mapped or serialized
-- per row. The database writes the text, by trigger, whenever the row is written, whatever statement or process
-- writes it: tag links change the row's `tag_list` in the same transaction (migration 0009), so the text follows
-- them too. The text is what src/rest/serializers.ts's serializeReference gives for the row, byte for byte; a
-- test compares the two (test/reference-rest-json.test.ts). Changing the representation means a migration that
-- replaces this function and rewrites the column.
-- Written out with to_json per value rather than json_build_object, whose text has spaces around every colon
-- and comma: the same bytes as JSON.stringify, in the same key order.

ALTER TABLE "shipping_references" ADD COLUMN "rest_json" TEXT NOT NULL DEFAULT '';

CREATE FUNCTION "reference_rest_json"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW."rest_json" := '{"id":' || to_json(NEW."id")::text
        || ',"reference_id":' || to_json(NEW."id")::text
        || ',"organization_id":' || to_json(NEW."organization_id")::text
        || ',"container_id":' || COALESCE(to_json(NEW."container_id")::text, 'null')
        || ',"bill_of_lading":' || COALESCE(to_json(NEW."bill_of_lading")::text, 'null')
        || ',"booking_number":' || COALESCE(to_json(NEW."booking_number")::text, 'null')
        || ',"carrier_code":' || to_json(NEW."carrier_code")::text
        || ',"carrier_scac":' || to_json(NEW."carrier_code")::text
        || ',"parent_reference_id":' || COALESCE(to_json(NEW."parent_reference_id")::text, 'null')
        || ',"active":' || CASE WHEN NEW."active" THEN 'true' ELSE 'false' END
        || ',"deactivate_reason":' || COALESCE(to_json(NEW."deactivate_reason")::text, 'null')
        || ',"auto_unsubscribed":' || CASE WHEN NEW."auto_unsubscribed" THEN 'true' ELSE 'false' END
        || ',"last_update_status":' || COALESCE(to_json(NEW."last_update_status")::text, 'null')
        || ',"consecutive_failures":' || NEW."consecutive_failures"::text
        || ',"estimated_departure":'
        || COALESCE('"' || to_char(NEW."estimated_departure", 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"', 'null')
        || ',"estimated_arrival":'
        || COALESCE('"' || to_char(NEW."estimated_arrival", 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"', 'null')
        || ',"tags":[' || COALESCE((
            SELECT string_agg('{"id":' || to_json(tag ->> 'id')::text || ',"name":' || to_json(tag ->> 'name')::text
                || '}', ',' ORDER BY position)
            FROM json_array_elements(NEW."tag_list"::json) WITH ORDINALITY AS listed(tag, position)), '')
        || '],"created_at":"' || to_char(NEW."created_at", 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
        || '","updated_at":"' || to_char(NEW."updated_at", 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') || '"}';
    RETURN NEW;
END
$$;

CREATE TRIGGER "shipping_references_rest_json" BEFORE INSERT OR UPDATE ON "shipping_references"
    FOR EACH ROW EXECUTE FUNCTION "reference_rest_json"();

-- The rows written before this migration: the same text, from the trigger.
UPDATE "shipping_references" SET "tag_list" = "tag_list";
