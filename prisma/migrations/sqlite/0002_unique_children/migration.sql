-- A bill of lading or booking has at most one child per container (issue 10): parallel reports of one container
-- created duplicates before this index existed. Existing duplicates are kept but detached, so that no history
-- is lost: the oldest child of each (parent, container) stays (UUIDv7 ids sort by creation), every later one
-- becomes a standalone container reference with its events, tags and updates (docs/decisions.md).
UPDATE "shipping_references"
SET "parent_reference_id" = NULL
WHERE "parent_reference_id" IS NOT NULL
  AND EXISTS (
    SELECT 1 FROM "shipping_references" AS "older"
    WHERE "older"."parent_reference_id" = "shipping_references"."parent_reference_id"
      AND "older"."container_id" = "shipping_references"."container_id"
      AND "older"."id" < "shipping_references"."id"
  );

-- Replaces the plain index on the same columns. Top-level references have a NULL parent, and NULLs are distinct
-- in a unique index on both databases, so duplicate top-level containers stay allowed (SPEC §6).
DROP INDEX "shipping_references_parent_reference_id_container_id_idx";

CREATE UNIQUE INDEX "shipping_references_parent_reference_id_container_id_key" ON "shipping_references"("parent_reference_id", "container_id");
