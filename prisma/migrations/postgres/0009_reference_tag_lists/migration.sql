-- The tags a reference carries, kept on its row as a JSON array in name order (docs/decisions.md, "Data path"):
-- a page of references reads its tags with its rows, at no cost per tag. The store rewrites the list in the
-- transaction that changes it: a link added or removed, a tag renamed or deleted (every carrier of the tag).
-- reference_tags stays the source of truth for filtering and is what the lists are rebuilt from. Text, not
-- jsonb: the list is only ever read whole and parsed by the application.

ALTER TABLE "shipping_references" ADD COLUMN "tag_list" TEXT NOT NULL DEFAULT '[]';

UPDATE "shipping_references" r SET "tag_list" = lists."tag_list"
FROM (
    SELECT rt."reference_id", json_agg(json_build_object('id', t."id", 'name', t."name", 'created_at', t."created_at",
        'updated_at', t."updated_at") ORDER BY t."name_key", t."id")::text AS "tag_list"
    FROM "reference_tags" rt JOIN "tags" t ON t."id" = rt."tag_id"
    GROUP BY rt."reference_id"
) AS lists
WHERE lists."reference_id" = r."id";
