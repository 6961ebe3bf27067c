import type { Reference, ReferenceUpdate, TaggedReference } from "../../domain/models.ts";
import type {
  ListedTags,
  ReferenceListQuery,
  ReferenceRepository,
  ReferenceTagFilter,
} from "../../domain/references/reference-repository.ts";
import type { Database, PrismaClient } from "../database.ts";
import { findInChunks } from "./in-chunks.ts";
import { chunksOf, fromJson, jsonParameter, toBoolean, toDate, toNullableDate } from "./rows.ts";
import type { SqlExecutor } from "./executor.ts";
import { Prisma } from "../__generated__/sqlite/client.ts";

/*
 * The shipping_references, reference_tags and reference_updates tables. Built by the unit of work
 * (src/store/sql/sql-store.ts) on its executor: inside `store.transaction`, statements run in that transaction.
 */

interface ReferenceRow {
  readonly id: string;
  readonly organization_id: string;
  readonly container_id: string | null;
  readonly bill_of_lading: string | null;
  readonly booking_number: string | null;
  readonly carrier_code: string;
  readonly parent_reference_id: string | null;
  readonly active: unknown;
  readonly deactivate_reason: string | null;
  readonly auto_unsubscribed: unknown;
  readonly last_update_status: string | null;
  readonly consecutive_failures: unknown;
  readonly estimated_departure: unknown;
  readonly estimated_arrival: unknown;
  readonly created_at: unknown;
  readonly updated_at: unknown;
  /** JSON array of the reference's tags, in name order. */
  readonly tags: unknown;
}

interface AggregatedTag {
  readonly id: string;
  readonly organization_id: string;
  readonly name: string;
  readonly created_at: string;
  readonly updated_at: string;
}

function taggedReferenceFromRow(row: ReferenceRow): TaggedReference {
  const tags = (fromJson(row.tags) as AggregatedTag[] | null) ?? [];
  return {
    id: row.id,
    organizationId: row.organization_id,
    containerId: row.container_id,
    billOfLading: row.bill_of_lading,
    bookingNumber: row.booking_number,
    carrierCode: row.carrier_code,
    parentReferenceId: row.parent_reference_id,
    active: toBoolean(row.active),
    deactivateReason: row.deactivate_reason,
    autoUnsubscribed: toBoolean(row.auto_unsubscribed),
    lastUpdateStatus: row.last_update_status,
    consecutiveFailures: Number(row.consecutive_failures),
    estimatedDeparture: toNullableDate(row.estimated_departure),
    estimatedArrival: toNullableDate(row.estimated_arrival),
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
    tags: tags.map((tag) => ({
      id: tag.id,
      organizationId: tag.organization_id,
      name: tag.name,
      createdAt: toDate(tag.created_at),
      updatedAt: toDate(tag.updated_at),
    })),
  };
}

const REFERENCE_COLUMNS = Prisma.raw(
  [
    "id",
    "organization_id",
    "container_id",
    "bill_of_lading",
    "booking_number",
    "carrier_code",
    "parent_reference_id",
    "active",
    "deactivate_reason",
    "auto_unsubscribed",
    "last_update_status",
    "consecutive_failures",
    "estimated_departure",
    "estimated_arrival",
    "created_at",
    "updated_at",
  ]
    .map((column) => `r."${column}"`)
    .join(", "),
);

export class SqlReferenceRepository implements ReferenceRepository {
  constructor(
    private readonly database: Database,
    /** Runs every statement: the driver, or the transaction of the unit of work that built this repository. */
    private readonly sql: SqlExecutor,
    /** Whether `sql` runs in a transaction: locks are taken only inside one. */
    private readonly inTransaction: boolean,
  ) {}

  /** Prisma's model API, for administration only (see src/store/sql/sql-store.ts). */
  private get client(): PrismaClient {
    return this.database.prisma;
  }

  /**
   * A correlated subquery giving the tags of reference `r` as a JSON array in name order: a page of references
   * and their tags come back in one statement. Served by the (reference_id, tag_id) primary key.
   */
  private tagsOfReference(): Prisma.Sql {
    if (this.database.provider === "postgres") {
      return Prisma.sql`(
        SELECT COALESCE(json_agg(json_build_object('id', t."id", 'organization_id', t."organization_id",
          'name', t."name", 'created_at', t."created_at", 'updated_at', t."updated_at") ORDER BY t."name_key", t."id"), '[]')
        FROM "reference_tags" rt JOIN "tags" t ON t."id" = rt."tag_id" WHERE rt."reference_id" = r."id")`;
    }
    return Prisma.sql`(
      SELECT json_group_array(json_object('id', t."id", 'organization_id', t."organization_id",
        'name', t."name", 'created_at', t."created_at", 'updated_at', t."updated_at") ORDER BY t."name_key", t."id")
      FROM "reference_tags" rt JOIN "tags" t ON t."id" = rt."tag_id" WHERE rt."reference_id" = r."id")`;
  }

  /** Reads references (alias `r`) with their tags; `from` is everything after SELECT's column list. */
  private async selectTaggedReferences(from: Prisma.Sql): Promise<TaggedReference[]> {
    const rows = await this.sql.all<ReferenceRow>(Prisma.sql`
      SELECT ${REFERENCE_COLUMNS}, ${this.tagsOfReference()} AS "tags" ${from}`);
    return rows.map(taggedReferenceFromRow);
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
    // Every mutable column, listed: a TaggedReference's `tags` (or any other extra property) is never written.
    const r = reference;
    await this.sql.run(Prisma.sql`
      UPDATE "shipping_references" SET "container_id" = ${r.containerId}, "bill_of_lading" = ${r.billOfLading},
        "booking_number" = ${r.bookingNumber}, "carrier_code" = ${r.carrierCode},
        "parent_reference_id" = ${r.parentReferenceId}, "active" = ${r.active},
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
        FROM "shipping_references" r WHERE r."id" IN (${Prisma.join(chunk)}) AND r."organization_id" = ${organizationId}`),
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
    // Lock first, read second: under READ COMMITTED a statement that waited for the lock still evaluates its
    // subqueries on the snapshot it started with, so tags read in the locking statement could miss the ones a
    // transaction that held the lock just committed. The second read, with its tags, sees them: PostgreSQL runs
    // it once the lock is held, though it is sent at once, behind the lock, on the pipelining connection.
    const [locked, [reference]] = await Promise.all([
      this.sql.all<{ id: string }>(Prisma.sql`
        SELECT "id" FROM "shipping_references"
        WHERE "id" = ${id} AND "organization_id" = ${organizationId}
        FOR NO KEY UPDATE`),
      this.findReferencesByIds(organizationId, [id]),
    ]);
    return locked.length > 0 && reference ? reference : null;
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

  async listReferences(organizationId: string, query: ReferenceListQuery): Promise<TaggedReference[]> {
    const conditions: Prisma.Sql[] = [
      Prisma.sql`r."organization_id" = ${organizationId}`,
      ...referenceConditions(query),
    ];
    if (!query.tags) {
      // Without a tag to include, walk the organization's references newest first (the (organization_id, id)
      // index) and drop each that carries an excluded tag: a NOT EXISTS probe of the (reference_id, tag_id)
      // primary key.
      if (query.excludedTags) conditions.push(carriesNone(organizationId, Prisma.sql`r."id"`, query.excludedTags));
      if (query.beforeId) conditions.push(Prisma.sql`r."id" < ${query.beforeId}`);
      return this.selectTaggedReferences(Prisma.sql`
        FROM "shipping_references" r WHERE ${Prisma.join(conditions, " AND ")}
        ORDER BY r."id" DESC LIMIT ${query.limit}`);
    }
    // With a tag filter, walk the (tag_id, reference_id) index of one listed tag newest first and check the
    // other tags per candidate through the (reference_id, tag_id) primary key. Walking all references newest
    // first and probing each one's tags would take about 33,000 probes to find 50 carriers of a tag held by
    // 0.15 % of 100,000 references. The listed tags, to include and to exclude, are resolved inside the
    // statement (ids and name keys of the organization), so the page costs one statement. CROSS JOIN is
    // SQLite's way to fix the join order (reference_tags outside): left to itself, its planner scanned the
    // organization's references first (113 ms instead of 0.2 ms on 100,000 references). PostgreSQL plans a
    // CROSS JOIN with a join condition like any inner join.
    if (query.excludedTags) {
      conditions.push(carriesNone(organizationId, Prisma.sql`rt."reference_id"`, query.excludedTags));
    }
    const page = this.referenceIdsByTags(organizationId, query.tags, query.beforeId, conditions, query.limit);
    return this.selectTaggedReferences(Prisma.sql`
      FROM (${page}) AS page JOIN "shipping_references" r ON r."id" = page."reference_id"
      ORDER BY r."id" DESC`);
  }

  /** The page of reference ids (column `reference_id`, newest first) carrying the filter's tags. */
  private referenceIdsByTags(
    organizationId: string,
    filter: ReferenceTagFilter,
    beforeId: string | undefined,
    candidateConditions: readonly Prisma.Sql[],
    limit: number,
  ): Prisma.Sql {
    const tagOf = (entry: { id?: string; nameKey?: string }) =>
      entry.id !== undefined
        ? Prisma.sql`(SELECT t."id" FROM "tags" t WHERE t."organization_id" = ${organizationId} AND t."id" = ${entry.id})`
        : Prisma.sql`(SELECT t."id" FROM "tags" t WHERE t."organization_id" = ${organizationId} AND t."name_key" = ${entry.nameKey})`;
    const entries = [...filter.ids.map((id) => ({ id })), ...filter.nameKeys.map((nameKey) => ({ nameKey }))];
    const conditions: Prisma.Sql[] = [Prisma.sql`r."id" = rt."reference_id"`, ...candidateConditions];
    if (beforeId) conditions.push(Prisma.sql`rt."reference_id" < ${beforeId}`);
    if (filter.match === "any" && entries.length > MAX_MERGED_TAG_WALKS) {
      conditions.push(Prisma.sql`rt."tag_id" IN (${tagsOf(organizationId, filter)})`);
      return Prisma.sql`
        SELECT DISTINCT rt."reference_id" FROM "reference_tags" rt CROSS JOIN "shipping_references" r
        WHERE ${Prisma.join(conditions, " AND ")}
        ORDER BY rt."reference_id" DESC LIMIT ${limit}`;
    }
    if (filter.match === "any") {
      // The first `limit` carriers of any listed tag are among the first `limit` carriers of each: walk each
      // tag's (tag_id, reference_id) index newest first for its own first `limit` (conditions checked on the
      // way), then merge. Reading every carrier of every listed tag and sorting them, as one IN list does, cost
      // PostgreSQL 0.8–1 ms for two tags of 150 carriers each against 0.2 ms here (docs/decisions.md).
      const walks = entries.map(
        (entry, index) => Prisma.sql`SELECT "reference_id" FROM (
          SELECT rt."reference_id" FROM "reference_tags" rt CROSS JOIN "shipping_references" r
          WHERE ${Prisma.join([...conditions, Prisma.sql`rt."tag_id" = ${tagOf(entry)}`], " AND ")}
          ORDER BY rt."reference_id" DESC LIMIT ${limit}) AS ${Prisma.raw(`"walk_${index}"`)}`,
      );
      return Prisma.sql`
        SELECT DISTINCT "reference_id" FROM (${Prisma.join(walks, " UNION ALL ")}) AS "walks"
        ORDER BY "reference_id" DESC LIMIT ${limit}`;
    }
    // `all`: the first listed tag drives the walk; each other one must be on the candidate. A listed tag that
    // does not exist makes its subquery NULL, so nothing matches, as the contract says.
    const [first, ...others] = entries;
    conditions.push(Prisma.sql`rt."tag_id" = ${tagOf(first!)}`);
    for (const other of others) {
      conditions.push(Prisma.sql`EXISTS (
        SELECT 1 FROM "reference_tags" other
        WHERE other."reference_id" = rt."reference_id" AND other."tag_id" = ${tagOf(other)})`);
    }
    return Prisma.sql`
      SELECT rt."reference_id" FROM "reference_tags" rt CROSS JOIN "shipping_references" r
      WHERE ${Prisma.join(conditions, " AND ")}
      ORDER BY rt."reference_id" DESC LIMIT ${limit}`;
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
        WHERE t."organization_id" = ${organizationId} AND rt."tag_id" IN (${Prisma.join(chunk)})
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
        FROM "shipping_references" r WHERE r."parent_reference_id" IN (${Prisma.join(chunk)})
        ORDER BY r."id"`),
    );
    for (const child of children) byParent.get(child.parentReferenceId!)?.push(child);
    return byParent;
  }

  async linkTags(referenceId: string, tagIds: readonly string[], at: Date): Promise<void> {
    for (const chunk of chunksOf(tagIds, 3)) {
      await this.sql.run(Prisma.sql`
        INSERT INTO "reference_tags" ("reference_id", "tag_id", "created_at")
        VALUES ${Prisma.join(chunk.map((tagId) => Prisma.sql`(${referenceId}, ${tagId}, ${at})`))}
        ON CONFLICT ("reference_id", "tag_id") DO NOTHING`);
    }
  }

  async unlinkTag(referenceId: string, tagId: string): Promise<void> {
    await this.sql.run(Prisma.sql`
      DELETE FROM "reference_tags" WHERE "reference_id" = ${referenceId} AND "tag_id" = ${tagId}`);
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
    const rows = await this.client.referenceUpdate.findMany({
      where: { referenceId, ...(beforeId ? { id: { lt: beforeId } } : {}) },
      orderBy: { id: "desc" },
      take: limit,
    });
    return rows.map((row) => ({ ...row, document: row.document as Record<string, unknown> }));
  }

  async findReferenceUpdatesByIds(organizationId: string, ids: readonly string[]): Promise<ReferenceUpdate[]> {
    if (ids.length === 0) return [];
    const rows = await this.client.referenceUpdate.findMany({ where: { organizationId, id: { in: [...ids] } } });
    return rows.map((row) => ({ ...row, document: row.document as Record<string, unknown> }));
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
    if (this.database.provider === "postgres") {
      // In id order: the LockRows step sits above the sort, so rows are locked in that order, and two bulk
      // writers that share references take them in the same order instead of waiting on each other in a cycle.
      // Lock first, read second, for the reason given at lockReference. Chunks are in id order too.
      const sorted = [...ids].sort();
      await findInChunks(sorted, (chunk) =>
        this.sql.all<{ id: string }>(Prisma.sql`
        SELECT "id" FROM "shipping_references"
        WHERE "id" IN (${Prisma.join(chunk)}) AND "organization_id" = ${organizationId}
        ORDER BY "id"
        FOR NO KEY UPDATE`),
      );
    }
    return this.findReferencesByIds(organizationId, ids);
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

/** The column filters of a reference listing, on the alias `r`. */
function referenceConditions(query: ReferenceListQuery): Prisma.Sql[] {
  const conditions: Prisma.Sql[] = [];
  if (query.active !== undefined) conditions.push(Prisma.sql`r."active" = ${query.active}`);
  if (query.carrierCode !== undefined) conditions.push(Prisma.sql`r."carrier_code" = ${query.carrierCode}`);
  if (query.containerId !== undefined) conditions.push(Prisma.sql`r."container_id" = ${query.containerId}`);
  if (query.billOfLading !== undefined) conditions.push(Prisma.sql`r."bill_of_lading" = ${query.billOfLading}`);
  if (query.bookingNumber !== undefined) conditions.push(Prisma.sql`r."booking_number" = ${query.bookingNumber}`);
  if (query.parentReferenceId !== undefined) {
    conditions.push(Prisma.sql`r."parent_reference_id" = ${query.parentReferenceId}`);
  }
  return conditions;
}

/**
 * The most listed tags whose carriers a `tag_match=any` page reads as one newest-first walk per tag; past this
 * many, one walk of all their carriers together (the statement would grow with every walk).
 */
const MAX_MERGED_TAG_WALKS = 8;

/** A subquery giving the ids of the organization's tags listed by id or by name key; unknown ones give none. */
function tagsOf(organizationId: string, listed: ListedTags): Prisma.Sql {
  return Prisma.sql`
    SELECT t."id" FROM "tags" t WHERE t."organization_id" = ${organizationId} AND ${isListed("t", listed)}`;
}

/**
 * The reference `referenceId` carries none of the excluded tags, resolved in the same statement (ids and name
 * keys of the organization): a probe of the (reference_id, tag_id) key joined to the tag's primary key.
 */
function carriesNone(organizationId: string, referenceId: Prisma.Sql, excluded: ListedTags): Prisma.Sql {
  return Prisma.sql`NOT EXISTS (
    SELECT 1 FROM "reference_tags" excluded JOIN "tags" et ON et."id" = excluded."tag_id"
    WHERE excluded."reference_id" = ${referenceId} AND et."organization_id" = ${organizationId}
      AND ${isListed("et", excluded)})`;
}

/** The tag aliased `alias` is one of those listed by id or by name key (at least one id or name key is given). */
function isListed(alias: string, listed: ListedTags): Prisma.Sql {
  const tag = Prisma.raw(`"${alias}"`);
  const byId = listed.ids.length > 0 ? Prisma.sql`${tag}."id" IN (${Prisma.join([...listed.ids])})` : null;
  const byName =
    listed.nameKeys.length > 0 ? Prisma.sql`${tag}."name_key" IN (${Prisma.join([...listed.nameKeys])})` : null;
  return Prisma.sql`(${Prisma.join(
    [byId, byName].filter((part): part is Prisma.Sql => part !== null),
    " OR ",
  )})`;
}
