import type { Reference, ReferenceJsonPage, ReferenceUpdate, TaggedReference } from "../../domain/models.ts";
import type { ReferenceListQuery, ReferenceRepository } from "../../domain/references/reference-repository.ts";
import type { Database } from "../database.ts";
import { findInChunks } from "./in-chunks.ts";
import { referencePage, referencePageIds } from "./reference-pages.ts";
import { chunksOf, jsonParameter, timestampParameter } from "./rows.ts";
import { rewriteTagList } from "./tag-lists.ts";
import {
  REFERENCE_COLUMNS,
  REFERENCE_UPDATE_COLUMNS,
  referenceUpdateFromRow,
  taggedReferenceFromValues,
  type ReferenceUpdateRow,
} from "./reference-rows.ts";
import type { ReadOptions, SqlExecutor } from "./executor.ts";
import { Prisma } from "./sql-template.ts";
import { utf8Bytes } from "../../domain/shared/utf8.ts";
import { isOneOf, valueTable } from "./value-lists.ts";
import { literalLimit } from "./literal-limit.ts";

/*
 * The shipping_references, reference_tags and reference_updates tables. Built by the unit of work
 * (src/store/sql/sql-store.ts) on its executor: inside `store.transaction`, statements run in that transaction.
 */

export class SqlReferenceRepository implements ReferenceRepository {
  constructor(
    private readonly database: Database,
    /** Runs every statement: the driver, or the transaction of the unit of work that built this repository. */
    private readonly sql: SqlExecutor,
    /** Whether `sql` runs in a transaction: locks are taken only inside one. */
    private readonly inTransaction: boolean,
  ) {}

  /** Reads references (alias `r`) with their tags; `from` is everything after SELECT's column list. */
  private async selectTaggedReferences(from: Prisma.Sql, options?: ReadOptions): Promise<TaggedReference[]> {
    const rows = await this.sql.values(Prisma.sql`SELECT ${REFERENCE_COLUMNS} ${from}`, options);
    return rows.map(taggedReferenceFromValues);
  }

  async insertReference(reference: Reference): Promise<void> {
    const r = reference;
    await this.sql.run(Prisma.sql`
      INSERT INTO "shipping_references" ("id", "organization_id", "container_id", "bill_of_lading", "booking_number",
        "carrier_code", "parent_reference_id", "active", "deactivate_reason", "auto_unsubscribed",
        "last_update_status", "consecutive_failures", "estimated_departure", "estimated_arrival", "created_at",
        "updated_at")
      VALUES (${r.id}, ${r.organizationId}, ${r.containerId}, ${r.billOfLading}, ${r.bookingNumber}, ${r.carrierCode},
        ${r.parentReferenceId}, ${r.active}, ${r.deactivateReason}, ${r.autoUnsubscribed}, ${r.lastUpdateStatus},
        ${r.consecutiveFailures}, ${r.estimatedDeparture}, ${r.estimatedArrival}, ${r.createdAt}, ${r.updatedAt})`);
  }

  async updateReference(reference: Reference): Promise<void> {
    // The tracking state's columns, listed (a TaggedReference's `tags`, or any other extra property, is never
    // written); not the identifiers, which never change after creation. SQLite rewrites an index's entry whenever
    // a column of the index is SET, even to the value it had: with the identifiers SET, each extraction outcome
    // rewrote five of the table's indexes, 86 KB of WAL per commit against 55 KB without (docs/benchmarks.md).
    const r = reference;
    await this.sql.run(Prisma.sql`
      UPDATE "shipping_references" SET "active" = ${r.active},
        "deactivate_reason" = ${r.deactivateReason}, "auto_unsubscribed" = ${r.autoUnsubscribed},
        "last_update_status" = ${r.lastUpdateStatus}, "consecutive_failures" = ${r.consecutiveFailures},
        "estimated_departure" = ${r.estimatedDeparture}, "estimated_arrival" = ${r.estimatedArrival},
        "updated_at" = ${r.updatedAt}
      WHERE "id" = ${r.id}`);
  }

  findReferencesByIds(organizationId: string, ids: readonly string[]): Promise<TaggedReference[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return findInChunks(ids, (chunk) =>
      this.selectTaggedReferences(Prisma.sql`
        FROM "shipping_references" r
        WHERE ${this.isOneOf(Prisma.sql`r."id"`, chunk)} AND r."organization_id" = ${organizationId}`),
    );
  }

  async lockReference(organizationId: string, id: string): Promise<TaggedReference | null> {
    this.assertInTransaction("lockReference");
    if (this.database.provider !== "postgres") {
      // SQLite runs one write transaction at a time: the row read here cannot change before commit.
      const [reference] = await this.findReferencesByIds(organizationId, [id]);
      return reference ?? null;
    }
    // NO KEY UPDATE: the lock an UPDATE of non-key columns takes. It serializes the services' read-check-write
    // of the row and still lets other transactions insert rows that point at it (tag links, events' outbox).
    // A statement that waited for the lock reads the row as the holder committed it, tag list included (every
    // change of the reference's tags rewrites its row): the lock and the read are one statement.
    const [reference] = await this.selectTaggedReferences(Prisma.sql`
      FROM "shipping_references" r WHERE r."id" = ${id} AND r."organization_id" = ${organizationId}
      FOR NO KEY UPDATE`);
    return reference ?? null;
  }

  async insertChildIfAbsent(child: Reference): Promise<{ reference: Reference; created: boolean }> {
    if (child.parentReferenceId === null || child.containerId === null) {
      throw new Error("insertChildIfAbsent needs a parent reference and a container");
    }
    // ON CONFLICT DO NOTHING rather than create-and-catch, for the reason given at insertTagIfAbsent.
    const inserted = await this.sql.run(Prisma.sql`
      INSERT INTO "shipping_references" ("id", "organization_id", "container_id", "bill_of_lading", "booking_number",
        "carrier_code", "parent_reference_id", "active", "deactivate_reason", "auto_unsubscribed",
        "last_update_status", "consecutive_failures", "estimated_departure", "estimated_arrival", "created_at",
        "updated_at")
      VALUES (${child.id}, ${child.organizationId}, ${child.containerId}, ${child.billOfLading},
        ${child.bookingNumber}, ${child.carrierCode}, ${child.parentReferenceId}, ${child.active},
        ${child.deactivateReason}, ${child.autoUnsubscribed}, ${child.lastUpdateStatus},
        ${child.consecutiveFailures}, ${child.estimatedDeparture}, ${child.estimatedArrival}, ${child.createdAt},
        ${child.updatedAt})
      ON CONFLICT ("parent_reference_id", "container_id") DO NOTHING`);
    if (inserted === 1) return { reference: child, created: true };
    const [holder] = await this.selectTaggedReferences(Prisma.sql`
      FROM "shipping_references" r
      WHERE r."parent_reference_id" = ${child.parentReferenceId} AND r."container_id" = ${child.containerId}`);
    if (!holder) throw new Error(`child ${child.containerId} neither inserted nor found`);
    const { tags, ...reference } = holder;
    return { reference, created: false };
  }

  listReferences(organizationId: string, query: ReferenceListQuery): Promise<TaggedReference[]> {
    return this.selectTaggedReferences(referencePage(this.database.provider, organizationId, query), { page: true });
  }

  async readReferenceJsonPage(organizationId: string, query: ReferenceListQuery): Promise<ReferenceJsonPage> {
    // One row whatever the page's length: the texts joined in page order (as bytes on SQLite, so that the read
    // thread hands over one buffer, not a string per reference for the event loop's heap to collect), the last
    // shown id, and the count of what was found, one more than the page asks telling that more follow.
    const asked = { ...query, limit: query.limit + 1 };
    const [row] = await this.sql.values(
      this.database.provider === "sqlite"
        ? // The page's ids are found once (MATERIALIZED: counted, and the shown ones joined to their rows), and
          // the texts are joined in the order the rows are reached: CROSS JOIN keeps the ordered ids outside, so
          // rows reach the aggregate newest first. An ORDER BY inside the aggregate, or rows numbered by a window
          // (the form PostgreSQL keeps), sorts the page's 35 KB of texts again: 228 against 143 µs per page. The
          // tests of page order hold SQLite to its order (test/reference-rest-json.test.ts compares every page's
          // bytes with the single reads).
          Prisma.sql`
            WITH "found" AS MATERIALIZED (${referencePageIds(this.database.provider, organizationId, asked)})
            SELECT CAST(string_agg(r."rest_json", ',') AS BLOB), min(r."id"), (SELECT count(*) FROM "found")
            FROM (SELECT "id" FROM "found" ORDER BY "id" DESC LIMIT ${literalLimit(query.limit)}) AS "shown"
            CROSS JOIN "shipping_references" r WHERE r."id" = "shown"."id"`
        : // Numbered by a window over the page's rows, once its LIMIT has applied. The SQLite form costs a lone
          // PostgreSQL the same, but under the bench's load it served 1,621 against 2,423 pages a second
          // (docs/decisions.md).
          Prisma.sql`
            SELECT string_agg(CASE WHEN "n" <= ${query.limit} THEN "rest_json" END, ',' ORDER BY "n"),
              max(CASE WHEN "n" = ${query.limit} THEN "id" END), CAST(count(*) AS INTEGER)
            FROM (
              SELECT "id", "rest_json", row_number() OVER (ORDER BY "id" DESC) AS "n"
              FROM (SELECT r."id", r."rest_json" ${referencePage(this.database.provider, organizationId, asked)}) AS "page"
            ) AS "found"`,
      { page: true },
    );
    const [json, lastId, found] = row as [Uint8Array | string | null, string | null, number];
    return {
      // The read thread hands bytes over as a Uint8Array: wrapped, not copied.
      json:
        json === null
          ? Buffer.alloc(0)
          : typeof json === "string"
            ? utf8Bytes(json)
            : Buffer.from(json.buffer, json.byteOffset, json.byteLength),
      lastId,
      more: found > query.limit,
    };
  }

  async listReferenceIdsByTagIds(
    organizationId: string,
    tagIds: readonly string[],
    limitPerTag: number,
  ): Promise<Map<string, string[]>> {
    const byTag = new Map<string, string[]>(tagIds.map((id) => [id, []]));
    if (tagIds.length === 0) return byTag;
    // A per-group LIMIT, which Prisma's query API cannot express: number each tag's links newest first and
    // keep the first N of each. Both SQLite (3.25+) and PostgreSQL have window functions; the
    // (tag_id, reference_id) index serves the partitions in order.
    const rows = await findInChunks(tagIds, (chunk) =>
      this.sql.all<{ tag_id: string; reference_id: string }>(Prisma.sql`
      SELECT ranked."tag_id", ranked."reference_id"
      FROM (
        SELECT rt."tag_id", rt."reference_id",
               ROW_NUMBER() OVER (PARTITION BY rt."tag_id" ORDER BY rt."reference_id" DESC) AS "rank_in_tag"
        FROM "reference_tags" AS rt
        JOIN "tags" AS t ON t."id" = rt."tag_id"
        WHERE t."organization_id" = ${organizationId} AND ${this.isOneOf(Prisma.sql`rt."tag_id"`, chunk)}
      ) AS ranked
      WHERE ranked."rank_in_tag" <= ${limitPerTag}
      ORDER BY ranked."tag_id", ranked."reference_id" DESC`),
    );
    for (const row of rows) byTag.get(row.tag_id)?.push(row.reference_id);
    return byTag;
  }

  async findChildrenByParentIds(parentIds: readonly string[]): Promise<Map<string, TaggedReference[]>> {
    const byParent = new Map<string, TaggedReference[]>(parentIds.map((id) => [id, []]));
    if (parentIds.length === 0) return byParent;
    const children = await findInChunks(parentIds, (chunk) =>
      this.selectTaggedReferences(Prisma.sql`
        FROM "shipping_references" r WHERE ${this.isOneOf(Prisma.sql`r."parent_reference_id"`, chunk)}
        ORDER BY r."id"`),
    );
    for (const child of children) byParent.get(child.parentReferenceId!)?.push(child);
    return byParent;
  }

  async linkTags(referenceId: string, tagIds: readonly string[], at: Date): Promise<void> {
    // The caller holds the reference (locked, or inserted by its own transaction); each new link's foreign key
    // check then takes its tag FOR KEY SHARE: references before tags, the store's lock order
    // (src/store/sql/sql-store.ts). In id order, as everything that locks several rows of one table; the ids as
    // one list parameter: one text however many tags a client links at once.
    if (tagIds.length > 0) {
      await this.sql.run(Prisma.sql`
        INSERT INTO "reference_tags" ("reference_id", "tag_id", "created_at")
        SELECT ${this.text(referenceId)}, "listed"."value", ${this.timestamp(at)}
        FROM ${valueTable(this.database.provider, [...tagIds].sort())}
        WHERE TRUE -- SQLite: an upsert's SELECT needs a WHERE, else ON CONFLICT would read as a join's ON
        ON CONFLICT ("reference_id", "tag_id") DO NOTHING`);
    }
    await this.sql.run(rewriteTagList(this.database.provider, referenceId));
  }

  async unlinkTag(referenceId: string, tagId: string): Promise<void> {
    await this.sql.run(Prisma.sql`
      DELETE FROM "reference_tags" WHERE "reference_id" = ${referenceId} AND "tag_id" = ${tagId}`);
    await this.sql.run(rewriteTagList(this.database.provider, referenceId));
  }

  async countReferenceTags(referenceId: string): Promise<number> {
    const [row] = await this.sql.all<{ count: unknown }>(Prisma.sql`
      SELECT COUNT(*) AS "count" FROM "reference_tags" WHERE "reference_id" = ${referenceId}`);
    return Number(row?.count ?? 0);
  }

  async insertReferenceUpdate(update: ReferenceUpdate): Promise<void> {
    await this.sql.run(Prisma.sql`
      INSERT INTO "reference_updates" ("id", "organization_id", "reference_id", "document", "created_at")
      VALUES (${update.id}, ${update.organizationId}, ${update.referenceId}, ${this.json(update.document)},
        ${update.createdAt})`);
  }

  async listReferenceUpdates(
    referenceId: string,
    beforeId: string | undefined,
    limit: number,
  ): Promise<ReferenceUpdate[]> {
    const before = beforeId ? Prisma.sql`AND "id" < ${beforeId}` : Prisma.empty;
    const rows = await this.sql.all<ReferenceUpdateRow>(Prisma.sql`
      SELECT ${REFERENCE_UPDATE_COLUMNS} FROM "reference_updates"
      WHERE "reference_id" = ${referenceId} ${before}
      ORDER BY "id" DESC LIMIT ${literalLimit(limit)}`);
    return rows.map(referenceUpdateFromRow);
  }

  async findReferenceUpdatesByIds(organizationId: string, ids: readonly string[]): Promise<ReferenceUpdate[]> {
    if (ids.length === 0) return [];
    const rows = await findInChunks(ids, (chunk) =>
      this.sql.all<ReferenceUpdateRow>(Prisma.sql`
        SELECT ${REFERENCE_UPDATE_COLUMNS} FROM "reference_updates"
        WHERE "organization_id" = ${organizationId} AND ${this.isOneOf(Prisma.sql`"id"`, chunk)}`),
    );
    return rows.map(referenceUpdateFromRow);
  }

  /** `expression` is one of `values`, the list bound as one parameter (value-lists.ts). */
  private isOneOf(expression: Prisma.Sql, values: readonly string[]): Prisma.Sql {
    return isOneOf(this.database.provider, expression, values);
  }

  /** Parameters in a SELECT list, where PostgreSQL cannot infer their types from a column. */
  private text(value: string): Prisma.Sql {
    return this.database.provider === "postgres" ? Prisma.sql`CAST(${value} AS TEXT)` : Prisma.sql`${value}`;
  }

  private timestamp(value: Date): Prisma.Sql {
    return timestampParameter(this.database.provider, value);
  }

  /** A JSON parameter: text on SQLite, jsonb on PostgreSQL. */
  private json(value: unknown): Prisma.Sql {
    return jsonParameter(this.database.provider, value);
  }

  private assertInTransaction(method: string): void {
    // A lock taken outside a transaction would be released at once and protect nothing.
    if (!this.inTransaction) throw new Error(`${method} must be called inside store.transaction`);
  }

  // ---------------------------------------------------------------------------------------------------------
  // Set-wise writes (bulk ingestion): a fixed number of statements whatever the number of rows; multi-row
  // statements are cut in chunks only past MAX_PARAMETERS_PER_STATEMENT.
  // ---------------------------------------------------------------------------------------------------------

  async lockReferences(organizationId: string, ids: readonly string[]): Promise<TaggedReference[]> {
    this.assertInTransaction("lockReferences");
    if (ids.length === 0) return [];
    // SQLite runs one write transaction at a time: rows read here cannot change before commit (see lockReference).
    if (this.database.provider !== "postgres") return this.findReferencesByIds(organizationId, ids);
    // In id order: the LockRows step sits above the sort, so rows are locked in that order, and two bulk writers
    // that share references take them in the same order instead of waiting on each other in a cycle. Each row is
    // read as its lock's last holder committed it (see lockReference). Chunks are in id order too.
    const sorted = [...ids].sort();
    return findInChunks(sorted, (chunk) =>
      this.selectTaggedReferences(Prisma.sql`
        FROM "shipping_references" r
        WHERE ${this.isOneOf(Prisma.sql`r."id"`, chunk)} AND r."organization_id" = ${organizationId}
        ORDER BY r."id"
        FOR NO KEY UPDATE`),
    );
  }

  async updateReferences(references: readonly Reference[]): Promise<void> {
    // PostgreSQL types the columns of a VALUES list from the values, and parameters arrive as text: cast those
    // whose column is not text. SQLite takes them as they are.
    const typed = (value: unknown, type: string) =>
      this.database.provider === "postgres" ? Prisma.sql`CAST(${value} AS ${Prisma.raw(type)})` : Prisma.sql`${value}`;
    for (const chunk of chunksOf(references, 9)) {
      const rows = chunk.map(
        (r) => Prisma.sql`(${r.id}, ${typed(r.active, "BOOLEAN")}, ${r.deactivateReason},
          ${typed(r.autoUnsubscribed, "BOOLEAN")}, ${r.lastUpdateStatus}, ${typed(r.consecutiveFailures, "INTEGER")},
          ${typed(r.estimatedDeparture, "TIMESTAMP(3)")}, ${typed(r.estimatedArrival, "TIMESTAMP(3)")},
          ${typed(r.updatedAt, "TIMESTAMP(3)")})`,
      );
      await this.sql.run(Prisma.sql`
        WITH "changed" ("id", "active", "deactivate_reason", "auto_unsubscribed", "last_update_status",
          "consecutive_failures", "estimated_departure", "estimated_arrival", "updated_at")
        AS (VALUES ${Prisma.join(rows)})
        UPDATE "shipping_references" SET "active" = "changed"."active",
          "deactivate_reason" = "changed"."deactivate_reason", "auto_unsubscribed" = "changed"."auto_unsubscribed",
          "last_update_status" = "changed"."last_update_status",
          "consecutive_failures" = "changed"."consecutive_failures",
          "estimated_departure" = "changed"."estimated_departure",
          "estimated_arrival" = "changed"."estimated_arrival", "updated_at" = "changed"."updated_at"
        FROM "changed" WHERE "shipping_references"."id" = "changed"."id"`);
    }
  }

  async insertReferenceUpdates(updates: readonly ReferenceUpdate[]): Promise<void> {
    for (const chunk of chunksOf(updates, 5)) {
      await this.sql.run(Prisma.sql`
        INSERT INTO "reference_updates" ("id", "organization_id", "reference_id", "document", "created_at")
        VALUES ${Prisma.join(
          chunk.map(
            (update) =>
              Prisma.sql`(${update.id}, ${update.organizationId}, ${update.referenceId}, ${this.json(update.document)},
                ${update.createdAt})`,
          ),
        )}`);
    }
  }
}
