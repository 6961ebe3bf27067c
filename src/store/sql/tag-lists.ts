import type { Tag } from "../../domain/models.ts";
import type { DatabaseProvider } from "../database.ts";
import { Prisma } from "./sql-template.ts";
import { fromJson, toDate } from "./rows.ts";

/*
 * `shipping_references.tag_list` (migration 0009): the tags a reference carries, as a JSON array of
 * `{ id, name, created_at, updated_at }` in (name_key, id) order, a copy of its reference_tags links. Every
 * statement that changes what a reference carries rewrites the list from the links in the same transaction:
 * linking and unlinking (the reference's own list, under the reference's row lock) and renaming or deleting a
 * tag (every carrier's list, with the carriers and the tag locked first on PostgreSQL: see
 * src/store/sql/tag-repository.ts). Pages of references read the list with the row, whatever it holds.
 */

/** One tag of a list as stored (dates as SQLite's ISO text, or PostgreSQL's zoneless UTC text). */
interface ListedTag {
  readonly id: string;
  readonly name: string;
  readonly created_at: string;
  readonly updated_at: string;
}

/** A stored tag list as the domain's tags of the reference's organization. */
export function tagsFromList(list: unknown, organizationId: string): Tag[] {
  const listed = fromJson(list) as ListedTag[];
  const tags: Tag[] = new Array(listed.length);
  for (let index = 0; index < listed.length; index++) {
    const tag = listed[index]!;
    tags[index] = {
      id: tag.id,
      organizationId,
      name: tag.name,
      createdAt: toDate(tag.created_at),
      updatedAt: toDate(tag.updated_at),
    };
  }
  return tags;
}

/**
 * The list of the reference whose id is `referenceId` (an SQL expression), built from its links; a tag whose id
 * is `leaving` is left out (it is about to be deleted).
 */
function listOf(provider: DatabaseProvider, referenceId: Prisma.Sql, leaving?: string): Prisma.Sql {
  const without = leaving === undefined ? Prisma.empty : Prisma.sql`AND t."id" <> ${leaving}`;
  if (provider === "postgres") {
    return Prisma.sql`COALESCE((
      SELECT json_agg(json_build_object('id', t."id", 'name', t."name", 'created_at', t."created_at",
        'updated_at', t."updated_at") ORDER BY t."name_key", t."id")::text
      FROM "reference_tags" rt JOIN "tags" t ON t."id" = rt."tag_id"
      WHERE rt."reference_id" = ${referenceId} ${without}), '[]')`;
  }
  return Prisma.sql`(
    SELECT json_group_array(json_object('id', t."id", 'name', t."name", 'created_at', t."created_at",
      'updated_at', t."updated_at") ORDER BY t."name_key", t."id")
    FROM "reference_tags" rt JOIN "tags" t ON t."id" = rt."tag_id"
    WHERE rt."reference_id" = ${referenceId} ${without})`;
}

/** Rewrites the tag list of one reference from its links. */
export function rewriteTagList(provider: DatabaseProvider, referenceId: string): Prisma.Sql {
  return Prisma.sql`
    UPDATE "shipping_references" SET "tag_list" = ${listOf(provider, Prisma.sql`${referenceId}`)}
    WHERE "id" = ${referenceId}`;
}

/** Rewrites the tag list of every carrier of tag `tagId`, leaving the tag out when it is being deleted. */
export function rewriteTagListsOfCarriers(
  provider: DatabaseProvider,
  tagId: string,
  options: { readonly leaving: boolean },
): Prisma.Sql {
  const carrier = Prisma.sql`"shipping_references"."id"`;
  return Prisma.sql`
    UPDATE "shipping_references"
    SET "tag_list" = ${listOf(provider, carrier, options.leaving ? tagId : undefined)}
    WHERE "id" IN (SELECT "reference_id" FROM "reference_tags" WHERE "tag_id" = ${tagId})`;
}

/**
 * PostgreSQL: locks the carriers of tag `tagId` in id order (as bulk writers lock references), so that the
 * rewrite that follows, a statement of its own with a snapshot taken once the locks are held, reads every link
 * that a transaction holding a carrier had changed. Taken before the tag itself: references come before tags in
 * the store's lock order (src/store/sql/sql-store.ts).
 */
export function lockCarriers(organizationId: string, tagId: string): Prisma.Sql {
  return Prisma.sql`
    SELECT r."id" FROM "shipping_references" r
    WHERE r."organization_id" = ${organizationId}
      AND r."id" IN (SELECT "reference_id" FROM "reference_tags" WHERE "tag_id" = ${tagId})
    ORDER BY r."id"
    FOR NO KEY UPDATE`;
}
