-- The tags a reference carries, kept on its row as a JSON array in name order (docs/decisions.md, "Data path"):
-- a page of references reads its tags with its rows, at no cost per tag. The store rewrites the list in the
-- transaction that changes it: a link added or removed, a tag renamed or deleted (every carrier of the tag).
-- reference_tags stays the source of truth for filtering and is what the lists are rebuilt from.

ALTER TABLE "shipping_references" ADD COLUMN "tag_list" TEXT NOT NULL DEFAULT '[]';

UPDATE "shipping_references" SET "tag_list" = (
    SELECT json_group_array(json_object('id', t."id", 'name', t."name", 'created_at', t."created_at",
        'updated_at', t."updated_at") ORDER BY t."name_key", t."id")
    FROM "reference_tags" rt JOIN "tags" t ON t."id" = rt."tag_id"
    WHERE rt."reference_id" = "shipping_references"."id")
WHERE EXISTS (SELECT 1 FROM "reference_tags" rt WHERE rt."reference_id" = "shipping_references"."id");
