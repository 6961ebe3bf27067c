import type { Tag } from "../../domain/models.ts";
import type { TagListQuery, TagRepository } from "../../domain/tags/tag-repository.ts";
import type { Database } from "../database.ts";
import { findInChunks } from "./in-chunks.ts";
import { chunksOf, toDate } from "./rows.ts";
import type { SqlExecutor } from "./executor.ts";
import { lockCarriers, rewriteTagListsOfCarriers, tagsFromList } from "./tag-lists.ts";
import { isUniqueViolation } from "./unique-violation.ts";
import { Prisma } from "./sql-template.ts";
import { isOneOf } from "./value-lists.ts";
import { literalLimit } from "./literal-limit.ts";

/*
 * The tags table (and the reference_tags links as seen from tags). Built by the unit of work
 * (src/store/sql/sql-store.ts) on its executor: inside `store.transaction`, statements run in that transaction.
 */

interface TagRow {
  readonly id: string;
  readonly organization_id: string;
  readonly name: string;
  readonly created_at: Date | string;
  readonly updated_at: Date | string;
}

/** Raw rows carry dates as Date (PostgreSQL) or as the ISO text SQLite stores. */
function tagFromRow(row: TagRow): Tag {
  return {
    id: row.id,
    organizationId: row.organization_id,
    name: row.name,
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
  };
}

const TAG_COLUMNS = Prisma.raw(
  ["id", "organization_id", "name", "name_key", "created_at", "updated_at"].map((column) => `t."${column}"`).join(", "),
);

function keyedTagFromRow(row: TagRow & { readonly name_key: string }): Tag & { nameKey: string } {
  return { ...tagFromRow(row), nameKey: row.name_key };
}

/** `text` as a LIKE pattern that matches only itself, with `!` as the escape character. */
function escapeLikePattern(text: string): string {
  return text.replace(/[!%_]/g, (character) => `!${character}`);
}

export class SqlTagRepository implements TagRepository {
  constructor(
    private readonly database: Database,
    /** Runs every statement: the driver, or the transaction of the unit of work that built this repository. */
    private readonly sql: SqlExecutor,
    /** Whether `sql` runs in a transaction: renames and deletions rewrite their carriers' tag lists in one. */
    private readonly inTransaction: boolean,
  ) {}

  async findTagsByIds(organizationId: string, ids: readonly string[]): Promise<Tag[]> {
    if (ids.length === 0) return [];
    const rows = await findInChunks(ids, (chunk) =>
      this.sql.all<TagRow>(Prisma.sql`
        SELECT ${TAG_COLUMNS} FROM "tags" t
        WHERE t."organization_id" = ${organizationId} AND ${isOneOf(this.database.provider, Prisma.sql`t."id"`, chunk)}`),
    );
    return rows.map(tagFromRow);
  }

  async findTagsByNameKeys(organizationId: string, nameKeys: readonly string[]): Promise<Tag[]> {
    if (nameKeys.length === 0) return [];
    return (await this.findKeyedTags(organizationId, nameKeys)).map(({ nameKey, ...tag }) => tag);
  }

  /** The organization's tags holding these name keys, with their keys. */
  private findKeyedTags(organizationId: string, nameKeys: readonly string[]): Promise<(Tag & { nameKey: string })[]> {
    return findInChunks(nameKeys, async (chunk) => {
      const rows = await this.sql.all<TagRow & { name_key: string }>(Prisma.sql`
        SELECT ${TAG_COLUMNS} FROM "tags" t
        WHERE t."organization_id" = ${organizationId}
          AND ${isOneOf(this.database.provider, Prisma.sql`t."name_key"`, chunk)}`);
      return rows.map(keyedTagFromRow);
    });
  }

  async insertTagIfAbsent(tag: Tag & { readonly nameKey: string }): Promise<{ tag: Tag; created: boolean }> {
    // ON CONFLICT DO NOTHING rather than create-and-catch: on PostgreSQL a failed statement would abort the
    // surrounding transaction, and the unique index makes concurrent upserts of one name converge on one row.
    const inserted = await this.sql.run(Prisma.sql`
      INSERT INTO "tags" ("id", "organization_id", "name", "name_key", "created_at", "updated_at")
      VALUES (${tag.id}, ${tag.organizationId}, ${tag.name}, ${tag.nameKey}, ${tag.createdAt}, ${tag.updatedAt})
      ON CONFLICT ("organization_id", "name_key") DO NOTHING`);
    const [holder] = await this.findKeyedTags(tag.organizationId, [tag.nameKey]);
    if (!holder) throw new Error(`tag "${tag.nameKey}" neither inserted nor found`);
    const { nameKey, ...held } = holder;
    return { tag: held, created: inserted === 1 };
  }

  async insertTagsIfAbsent(tags: readonly (Tag & { readonly nameKey: string })[]): Promise<Map<string, Tag>> {
    const byKey = new Map<string, Tag>();
    if (tags.length === 0) return byKey;
    for (const chunk of chunksOf(tags, 6)) {
      await this.sql.run(Prisma.sql`
        INSERT INTO "tags" ("id", "organization_id", "name", "name_key", "created_at", "updated_at")
        VALUES ${Prisma.join(
          chunk.map(
            (tag) =>
              Prisma.sql`(${tag.id}, ${tag.organizationId}, ${tag.name}, ${tag.nameKey}, ${tag.createdAt}, ${tag.updatedAt})`,
          ),
        )}
        ON CONFLICT ("organization_id", "name_key") DO NOTHING`);
    }
    const holders = await this.findKeyedTags(
      tags[0]!.organizationId,
      tags.map((tag) => tag.nameKey),
    );
    for (const holder of holders) {
      const { nameKey, ...tag } = holder;
      byKey.set(nameKey, tag);
    }
    return byKey;
  }

  async renameTag(organizationId: string, id: string, name: string, nameKey: string, at: Date): Promise<Tag | null> {
    this.assertInTransaction("renameTag");
    const postgres = this.database.provider === "postgres";
    if (postgres && !(await this.lockCarriersAndTag(organizationId, id))) return null;
    // The NOT EXISTS answers the common case; two renames racing to one name both pass it, and the unique index
    // on (organization_id, name_key) refuses the later one: that is the same answer, not an error. On PostgreSQL
    // the refused statement would abort the transaction: a savepoint keeps it usable.
    if (postgres) await this.sql.run(Prisma.sql`SAVEPOINT "rename_tag"`);
    const updated = await this.sql
      .run(
        Prisma.sql`
      UPDATE "tags" SET "name" = ${name}, "name_key" = ${nameKey}, "updated_at" = ${at}
      WHERE "id" = ${id} AND "organization_id" = ${organizationId}
        AND NOT EXISTS (
          SELECT 1 FROM "tags" AS other
          WHERE other."organization_id" = ${organizationId} AND other."name_key" = ${nameKey} AND other."id" <> ${id}
        )`,
      )
      .catch(async (error: unknown) => {
        if (!isUniqueViolation(error)) throw error;
        if (postgres) await this.sql.run(Prisma.sql`ROLLBACK TO SAVEPOINT "rename_tag"`);
        return 0;
      });
    if (updated === 0) return null;
    await this.rewriteCarriers(id, { leaving: false });
    const [tag] = await this.findTagsByIds(organizationId, [id]);
    return tag ?? null;
  }

  async deleteTag(organizationId: string, id: string): Promise<boolean> {
    this.assertInTransaction("deleteTag");
    // Locked on PostgreSQL as for a rename: a link being added to the tag waits, then fails on the foreign key.
    if (this.database.provider === "postgres") {
      if (!(await this.lockCarriersAndTag(organizationId, id))) return false;
    } else {
      const [tag] = await this.sql.all<{ id: string }>(
        Prisma.sql`SELECT "id" FROM "tags" WHERE "id" = ${id} AND "organization_id" = ${organizationId}`,
      );
      if (!tag) return false;
    }
    await this.rewriteCarriers(id, { leaving: true });
    // Its links (to references and to webhook endpoints' filters) go with it: ON DELETE CASCADE.
    const deleted = await this.sql.run(Prisma.sql`
      DELETE FROM "tags" WHERE "id" = ${id} AND "organization_id" = ${organizationId}`);
    return deleted > 0;
  }

  /**
   * PostgreSQL: what a rename or a deletion holds before it changes the tag, in the store's lock order
   * (src/store/sql/sql-store.ts: references, then tags). The tag's carriers first, in id order, as a link's
   * writer holds its reference before the foreign key check of the link takes the tag; then the tag, FOR
   * UPDATE, which holds back every link to it being added (the check waits); then the carriers again: those
   * whose link committed between the first lock and the tag's (a writer the tag's lock waited for) are locked
   * now, and no other can appear while the tag is held. So the rewrite, a statement of its own, reads every link
   * a transaction holding a carrier changed, and no carrier is written with the old name. The carriers locked
   * before the tag are most of them, the parent of children being reported among them: the report, holding the
   * parent and linking its children to the tag, finishes before the tag is taken instead of waiting for it in a
   * cycle (a deadlock, then a 500). Sent together: one round trip, run in this order. False: no such tag.
   */
  private async lockCarriersAndTag(organizationId: string, id: string): Promise<boolean> {
    const [, tags] = await Promise.all([
      this.sql.all(lockCarriers(organizationId, id)),
      this.sql.all<{ id: string }>(lockTag(organizationId, id)),
      this.sql.all(lockCarriers(organizationId, id)),
    ]);
    return tags.length > 0;
  }

  /**
   * Rewrites the tag lists of the tag's carriers (src/store/sql/tag-lists.ts), locked on PostgreSQL beforehand
   * (lockCarriersAndTag); a carrier whose link was removed meanwhile is no longer rewritten, its own list being
   * right.
   */
  private async rewriteCarriers(tagId: string, options: { readonly leaving: boolean }): Promise<void> {
    await this.sql.run(rewriteTagListsOfCarriers(this.database.provider, tagId, options));
  }

  async listTags(organizationId: string, query: TagListQuery): Promise<(Tag & { nameKey: string })[]> {
    // The prefix matches literally: LIKE's wildcards in it (`%`, `_`) and the escape character itself are escaped,
    // the same on both databases (an explicit ESCAPE; SQLite has no default one).
    const prefix = query.namePrefixKey
      ? Prisma.sql`AND t."name_key" LIKE ${`${escapeLikePattern(query.namePrefixKey)}%`} ESCAPE '!'`
      : Prisma.empty;
    const after = query.after
      ? Prisma.sql`AND (t."name_key" > ${query.after.nameKey}
          OR (t."name_key" = ${query.after.nameKey} AND t."id" > ${query.after.id}))`
      : Prisma.empty;
    const rows = await this.sql.all<TagRow & { name_key: string }>(Prisma.sql`
      SELECT ${TAG_COLUMNS} FROM "tags" t
      WHERE t."organization_id" = ${organizationId} ${prefix} ${after}
      ORDER BY t."name_key", t."id" LIMIT ${literalLimit(query.limit)}`);
    return rows.map(keyedTagFromRow);
  }

  async countTags(organizationId: string): Promise<number> {
    const [row] = await this.sql.all<{ count: unknown }>(Prisma.sql`
      SELECT COUNT(*) AS "count" FROM "tags" WHERE "organization_id" = ${organizationId}`);
    return Number(row?.count ?? 0);
  }

  async findTagsByReferenceIds(referenceIds: readonly string[]): Promise<Map<string, Tag[]>> {
    const byReference = new Map<string, Tag[]>(referenceIds.map((id) => [id, []]));
    if (referenceIds.length === 0) return byReference;
    // The lists the references keep on their rows (src/store/sql/tag-lists.ts): one primary-key probe each.
    const rows = await findInChunks(referenceIds, (chunk) =>
      this.sql.all<{ id: string; organization_id: string; tag_list: unknown }>(Prisma.sql`
      SELECT r."id", r."organization_id", r."tag_list" FROM "shipping_references" r
      WHERE ${isOneOf(this.database.provider, Prisma.sql`r."id"`, chunk)}`),
    );
    for (const row of rows) byReference.set(row.id, tagsFromList(row.tag_list, row.organization_id));
    return byReference;
  }

  private assertInTransaction(method: string): void {
    // The tag and its carriers' lists change together or not at all.
    if (!this.inTransaction) throw new Error(`${method} must be called inside store.transaction`);
  }
}

/** PostgreSQL: the tag's row, FOR UPDATE (the lock a foreign key check of a new link waits for). */
function lockTag(organizationId: string, id: string): Prisma.Sql {
  return Prisma.sql`SELECT "id" FROM "tags" WHERE "id" = ${id} AND "organization_id" = ${organizationId} FOR UPDATE`;
}
