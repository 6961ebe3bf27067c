import type { LifecycleEvent, TagSnapshot } from "../domain/lifecycle/lifecycle-event.ts";
import type { Organization, Reference, ReferenceUpdate, Tag, TaggedReference } from "../domain/models.ts";
import type {
  ApiKeyRecord,
  EventListQuery,
  EventsCommittedListener,
  ListedTags,
  ReferenceListQuery,
  ReferenceTagFilter,
  Store,
  TagListQuery,
} from "../domain/store.ts";
import type { WebhookDelivery } from "../domain/webhooks/webhook-models.ts";
import type { WebhookRepository } from "../domain/webhooks/webhook-repository.ts";
import type { Database, PrismaClient } from "./database.ts";
import { findInChunks } from "./in-chunks.ts";
import type { SecretCipher } from "./secret-cipher.ts";
import type { SqlExecutor } from "./sql-executor.ts";
import { isUniqueViolation } from "./unique-violation.ts";
import { PrismaWebhookRepository } from "./prisma-webhook-repository.ts";
import { Prisma } from "./__generated__/sqlite/client.ts";

/*
 * The only implementation of the domain's Store. Every list method takes `limit + 1`-style limits from the
 * caller and orders by an indexed keyset; relation lookups take many ids at once so that DataLoaders can batch.
 *
 * Statements are `Prisma.sql` fragments run by `this.sql` (src/store/sql-executor.ts): on the driver, in the
 * unit of work's transaction when there is one. Prisma's model API (`this.client`) serves only what never runs
 * inside a unit of work and is not on a hot path (administration: organizations listed, API keys listed and
 * revoked; tag listing; update documents; retention).
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

interface ApiKeyRow {
  readonly id: string;
  readonly organization_id: string;
  readonly key_hash: string;
  readonly key_prefix: string;
  readonly created_at: unknown;
  readonly revoked_at: unknown;
}

function apiKeyFromRow(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    organizationId: row.organization_id,
    keyHash: row.key_hash,
    keyPrefix: row.key_prefix,
    createdAt: toDate(row.created_at),
    revokedAt: toNullableDate(row.revoked_at),
  };
}

/*
 * Hot paths are one statement each: every statement through Prisma costs far more in the client
 * than in the database (docs/decisions.md, "Data path"), and a raw statement skips the query compiler. Raw
 * rows come back with the driver's types, which differ by provider: booleans as 0/1 and JSON as text on
 * SQLite, timestamps inside JSON without a zone on PostgreSQL. The helpers below read either.
 */

/** A timestamp column or a timestamp inside aggregated JSON. PostgreSQL's JSON drops the zone: it is UTC. */
export function toDate(value: unknown): Date {
  if (value instanceof Date) return value;
  const text = String(value);
  return new Date(/(Z|[+-]\d\d:?\d\d)$/.test(text) ? text : `${text}Z`);
}

export function toNullableDate(value: unknown): Date | null {
  return value === null || value === undefined ? null : toDate(value);
}

function toBoolean(value: unknown): boolean {
  return typeof value === "boolean" ? value : Number(value) !== 0;
}

function fromJson(value: unknown): unknown {
  return typeof value === "string" ? JSON.parse(value) : value;
}

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

/** One transaction's lifecycle events, handed to the listeners once it has committed. */
interface UnitOfWork {
  readonly events: LifecycleEvent[];
}

interface EventRow {
  readonly id: string;
  readonly organization_id: string;
  readonly reference_id: string;
  readonly type: string;
  readonly occurred_at: unknown;
  readonly detail: unknown;
  readonly reference_tags: unknown;
}

function eventFromRow(row: EventRow): LifecycleEvent {
  return {
    id: row.id,
    organizationId: row.organization_id,
    referenceId: row.reference_id,
    type: row.type,
    occurredAt: toDate(row.occurred_at),
    detail: fromJson(row.detail),
    referenceTags: fromJson(row.reference_tags) as TagSnapshot[],
  } as unknown as LifecycleEvent;
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

const EVENT_COLUMNS = Prisma.raw(
  ["id", "organization_id", "reference_id", "type", "occurred_at", "detail", "reference_tags"]
    .map((column) => `e."${column}"`)
    .join(", "),
);

/**
 * SQLite's largest number of bound parameters per statement is 32,766 (3.32+); multi-row INSERTs are cut in
 * chunks that stay well under it on both databases (PostgreSQL allows 65,535).
 */
const MAX_PARAMETERS_PER_STATEMENT = 30_000;

export class PrismaStore implements Store {
  constructor(
    private readonly database: Database,
    /** Webhook signing secrets are stored encrypted with it. */
    private readonly secretCipher: SecretCipher,
    /** Runs every statement of the store: the driver, or the transaction of this store's unit of work. */
    private readonly sql: SqlExecutor = database.sql,
    private readonly unit: UnitOfWork | null = null,
    private readonly committedListeners = new Set<EventsCommittedListener>(),
  ) {}

  /** Prisma's model API, for administration only (see the top of this file). */
  private get client(): PrismaClient {
    return this.database.prisma;
  }

  get webhooks(): WebhookRepository {
    this.webhookStore ??= new PrismaWebhookRepository(this.database, this.database.prisma, this.secretCipher, this.sql);
    return this.webhookStore;
  }

  private webhookStore: WebhookRepository | undefined;

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

  async transaction<T>(work: (store: Store) => Promise<T>): Promise<T> {
    if (this.unit) return work(this);
    const unit: UnitOfWork = { events: [] };
    const result = await this.database.sql.transaction((sql) =>
      work(new PrismaStore(this.database, this.secretCipher, sql, unit, this.committedListeners)),
    );
    this.publishCommitted(unit.events);
    return result;
  }

  onEventsCommitted(listener: EventsCommittedListener): () => void {
    this.committedListeners.add(listener);
    return () => this.committedListeners.delete(listener);
  }

  private publishCommitted(events: readonly LifecycleEvent[]): void {
    if (events.length === 0) return;
    for (const listener of this.committedListeners) listener(events);
  }

  async insertOrganization(organization: Organization): Promise<void> {
    const { id, name, createdAt } = organization;
    await this.sql.run(Prisma.sql`
      INSERT INTO "organizations" ("id", "name", "created_at") VALUES (${id}, ${name}, ${createdAt})`);
  }

  countOrganizations(): Promise<number> {
    return this.client.organization.count();
  }

  async findOrganization(id: string): Promise<Organization | null> {
    const [row] = await this.sql.all<{ id: string; name: string; created_at: unknown }>(Prisma.sql`
      SELECT "id", "name", "created_at" FROM "organizations" WHERE "id" = ${id}`);
    return row ? { id: row.id, name: row.name, createdAt: toDate(row.created_at) } : null;
  }

  listOrganizations(): Promise<Organization[]> {
    return this.client.organization.findMany({ orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
  }

  listApiKeys(organizationId: string): Promise<ApiKeyRecord[]> {
    return this.client.apiKey.findMany({ where: { organizationId }, orderBy: [{ createdAt: "asc" }, { id: "asc" }] });
  }

  async lockOrganization(organizationId: string): Promise<void> {
    this.assertInTransaction("lockOrganization");
    // SQLite runs one write transaction at a time (the driver adapter queues them), so there is nothing to lock.
    // NO KEY UPDATE, not UPDATE: it still serializes lockers but lets inserts that reference the organization
    // (API keys) check their foreign key without waiting.
    if (this.database.provider !== "postgres") return;
    await this.sql.all(Prisma.sql`SELECT 1 FROM "organizations" WHERE "id" = ${organizationId} FOR NO KEY UPDATE`);
  }

  async insertApiKey(key: ApiKeyRecord): Promise<void> {
    await this.sql.run(Prisma.sql`
      INSERT INTO "api_keys" ("id", "organization_id", "key_hash", "key_prefix", "created_at", "revoked_at")
      VALUES (${key.id}, ${key.organizationId}, ${key.keyHash}, ${key.keyPrefix}, ${key.createdAt}, ${key.revokedAt})`);
  }

  async findApiKeyByHash(keyHash: string): Promise<ApiKeyRecord | null> {
    // Every authenticated request starts here: the unique key_hash index, one statement.
    const [row] = await this.sql.all<ApiKeyRow>(Prisma.sql`
      SELECT "id", "organization_id", "key_hash", "key_prefix", "created_at", "revoked_at"
      FROM "api_keys" WHERE "key_hash" = ${keyHash}`);
    return row ? apiKeyFromRow(row) : null;
  }

  async revokeApiKey(id: string, at: Date): Promise<ApiKeyRecord | null> {
    const key = await this.client.apiKey.findUnique({ where: { id } });
    if (!key) return null;
    if (key.revokedAt) return key;
    return this.client.apiKey.update({ where: { id }, data: { revokedAt: at } });
  }

  async findTagsByIds(organizationId: string, ids: readonly string[]): Promise<Tag[]> {
    if (ids.length === 0) return [];
    const rows = await findInChunks(ids, (chunk) =>
      this.sql.all<TagRow>(Prisma.sql`
        SELECT ${TAG_COLUMNS} FROM "tags" t
        WHERE t."organization_id" = ${organizationId} AND t."id" IN (${Prisma.join(chunk)})`),
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
        WHERE t."organization_id" = ${organizationId} AND t."name_key" IN (${Prisma.join(chunk)})`);
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
    // The NOT EXISTS answers the common case; two renames racing to one name both pass it, and the unique index
    // on (organization_id, name_key) refuses the later one: that is the same answer, not an error.
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
      .catch((error: unknown) => {
        if (isUniqueViolation(error)) return 0;
        throw error;
      });
    if (updated === 0) return null;
    const [tag] = await this.findTagsByIds(organizationId, [id]);
    return tag ?? null;
  }

  async deleteTag(organizationId: string, id: string): Promise<boolean> {
    // Its links (to references and to webhook endpoints' filters) go with it: ON DELETE CASCADE.
    const deleted = await this.sql.run(Prisma.sql`
      DELETE FROM "tags" WHERE "id" = ${id} AND "organization_id" = ${organizationId}`);
    return deleted > 0;
  }

  listTags(organizationId: string, query: TagListQuery): Promise<(Tag & { nameKey: string })[]> {
    const where: Prisma.TagWhereInput = { organizationId };
    if (query.namePrefixKey) where.nameKey = { startsWith: query.namePrefixKey };
    if (query.after) {
      where.OR = [
        { nameKey: { gt: query.after.nameKey } },
        { nameKey: query.after.nameKey, id: { gt: query.after.id } },
      ];
    }
    return this.client.tag.findMany({ where, orderBy: [{ nameKey: "asc" }, { id: "asc" }], take: query.limit });
  }

  async countTags(organizationId: string): Promise<number> {
    const [row] = await this.sql.all<{ count: unknown }>(Prisma.sql`
      SELECT COUNT(*) AS "count" FROM "tags" WHERE "organization_id" = ${organizationId}`);
    return Number(row?.count ?? 0);
  }

  async findTagsByReferenceIds(referenceIds: readonly string[]): Promise<Map<string, Tag[]>> {
    const byReference = new Map<string, Tag[]>(referenceIds.map((id) => [id, []]));
    if (referenceIds.length === 0) return byReference;
    // One join instead of Prisma's `include`, which sends two statements: this runs for every page of
    // references on both surfaces.
    const rows = await findInChunks(referenceIds, (chunk) =>
      this.sql.all<TagRow & { reference_id: string }>(Prisma.sql`
      SELECT rt."reference_id", t."id", t."organization_id", t."name", t."created_at", t."updated_at"
      FROM "reference_tags" rt JOIN "tags" t ON t."id" = rt."tag_id"
      WHERE rt."reference_id" IN (${Prisma.join(chunk)})
      ORDER BY t."name_key", t."id"`),
    );
    for (const row of rows) byReference.get(row.reference_id)?.push(tagFromRow(row));
    return byReference;
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
    // transaction that held the lock just committed. The second read, with its tags, sees them.
    const locked = await this.sql.all<{ id: string }>(Prisma.sql`
      SELECT "id" FROM "shipping_references"
      WHERE "id" = ${id} AND "organization_id" = ${organizationId}
      FOR NO KEY UPDATE`);
    if (locked.length === 0) return null;
    const [reference] = await this.findReferencesByIds(organizationId, [id]);
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
    if (filter.match === "any") {
      conditions.push(Prisma.sql`rt."tag_id" IN (${tagsOf(organizationId, filter)})`);
      return Prisma.sql`
        SELECT DISTINCT rt."reference_id" FROM "reference_tags" rt CROSS JOIN "shipping_references" r
        WHERE ${Prisma.join(conditions, " AND ")}
        ORDER BY rt."reference_id" DESC LIMIT ${limit}`;
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

  async findEventsByIds(organizationId: string, ids: readonly string[], notBefore: Date): Promise<LifecycleEvent[]> {
    if (ids.length === 0) return [];
    const rows = await this.client.lifecycleEvent.findMany({
      where: { organizationId, id: { in: [...ids] }, occurredAt: { gte: notBefore } },
    });
    return rows.map(lifecycleEventFromRow);
  }

  async insertEvent(event: LifecycleEvent): Promise<void> {
    const [position] = await this.takeLivePositions(1);
    await this.sql.run(Prisma.sql`
      INSERT INTO "lifecycle_events" ("id", "organization_id", "reference_id", "type", "occurred_at", "detail",
        "reference_tags", "position")
      VALUES (${event.id}, ${event.organizationId}, ${event.referenceId}, ${event.type}, ${event.occurredAt},
        ${this.json(event.detail)}, ${this.json(event.referenceTags)}, ${this.livePosition(position)})`);
    // Outside a transaction the insert is its own commit.
    if (this.unit) this.unit.events.push(event);
    else this.publishCommitted([event]);
  }

  /**
   * On SQLite, the live positions of the next `count` events of this transaction, in insertion order: one bump
   * of the counter for the whole statement instead of migration 0004's trigger, which runs two UPDATEs per
   * event (the counter, then the row just inserted and three of its indexes). The transaction holds SQLite's
   * write lock from this bump to its commit, so the numbers are in commit order as the trigger's were. Empty
   * (NULL positions, numbered by the trigger) outside a transaction, where the bump and the insert would be two
   * commits, and on PostgreSQL, whose positions come from a sequence and the commit numbering (migration 0006).
   */
  private async takeLivePositions(count: number): Promise<number[]> {
    if (this.database.provider !== "sqlite" || !this.unit || count === 0) return [];
    const [row] = await this.sql.all<{ last_position: number }>(Prisma.sql`
      UPDATE "lifecycle_log_sequence" SET "last_position" = "last_position" + ${count} WHERE "id" = 1
      RETURNING "last_position"`);
    const first = Number(row!.last_position) - count + 1;
    return Array.from({ length: count }, (_, offset) => first + offset);
  }

  /** A position from takeLivePositions, or the database's own numbering (the trigger, the sequence). */
  private livePosition(position: number | undefined): Prisma.Sql {
    if (position !== undefined) return Prisma.sql`${position}`;
    return this.database.provider === "postgres" ? Prisma.sql`DEFAULT` : Prisma.sql`NULL`;
  }

  /** A JSON parameter: text on SQLite, jsonb on PostgreSQL. */
  private json(value: unknown): Prisma.Sql {
    const text = JSON.stringify(value);
    return this.database.provider === "postgres" ? Prisma.sql`CAST(${text} AS JSONB)` : Prisma.sql`${text}`;
  }

  /**
   * The events page as a subquery, walking the (reference_id, occurred_at, id) index in the page's order.
   * SQLite's planner picks that index for `reference_id = ? AND occurred_at >= ?`, ordered with reference_id
   * first. PostgreSQL drops a column fixed by an equality from the ORDER BY and, for a reference holding most of
   * the table, walked the occurred_at index instead, filtering out every other reference's events (23 ms instead
   * of 0.25 ms per page on 120,000 events, 15–20 ms per first page in the bench). There the reference is bounded
   * by row comparisons on (reference_id, occurred_at[, id]) that imply the equality without stating it: the
   * ORDER BY keeps its leading column, only that index serves it, and the bounds are its index conditions.
   */
  private eventPage(query: EventListQuery): Prisma.Sql {
    const from = query.from && query.from > query.notBefore ? query.from : query.notBefore;
    const reference = query.referenceId;
    const postgres = this.database.provider === "postgres";
    const conditions: Prisma.Sql[] = postgres
      ? [
          Prisma.sql`(e."reference_id", e."occurred_at") >= (${reference}, ${from})`,
          query.to
            ? Prisma.sql`(e."reference_id", e."occurred_at") <= (${reference}, ${query.to})`
            : Prisma.sql`e."reference_id" <= ${reference}`,
        ]
      : [Prisma.sql`e."reference_id" = ${reference}`, Prisma.sql`e."occurred_at" >= ${from}`];
    if (query.to && !postgres) conditions.push(Prisma.sql`e."occurred_at" <= ${query.to}`);
    if (query.types && query.types.length > 0) {
      conditions.push(Prisma.sql`e."type" IN (${Prisma.join([...query.types])})`);
    }
    const direction = Prisma.raw(query.order === "asc" ? "ASC" : "DESC");
    if (query.after) {
      const beyond = Prisma.raw(query.order === "asc" ? ">" : "<");
      const { occurredAt, id } = query.after;
      conditions.push(
        postgres
          ? Prisma.sql`(e."reference_id", e."occurred_at", e."id") ${beyond} (${reference}, ${occurredAt}, ${id})`
          : Prisma.sql`(e."occurred_at" ${beyond} ${occurredAt} OR (e."occurred_at" = ${occurredAt} AND e."id" ${beyond} ${id}))`,
      );
    }
    return Prisma.sql`
      SELECT ${EVENT_COLUMNS} FROM "lifecycle_events" e WHERE ${Prisma.join(conditions, " AND ")}
      ORDER BY e."reference_id" ${direction}, e."occurred_at" ${direction}, e."id" ${direction}
      LIMIT ${query.limit}`;
  }

  async listEvents(query: EventListQuery): Promise<LifecycleEvent[]> {
    const rows = await this.sql.all<EventRow>(this.eventPage(query));
    return rows.map(eventFromRow);
  }

  async listEventsOfReference(organizationId: string, query: EventListQuery): Promise<LifecycleEvent[] | null> {
    // The reference's row LEFT JOINed to its page of events: no row at all means no such reference, one row
    // with a NULL event an empty page. The events keep the page's order (the subquery's ORDER BY is repeated
    // outside, where SQL guarantees it).
    const direction = Prisma.raw(query.order === "asc" ? "ASC" : "DESC");
    const rows = await this.sql.all<Omit<EventRow, "id"> & { id: string | null }>(Prisma.sql`
      SELECT page.* FROM "shipping_references" r
      LEFT JOIN (${this.eventPage(query)}) AS page ON page."reference_id" = r."id"
      WHERE r."id" = ${query.referenceId} AND r."organization_id" = ${organizationId}
      ORDER BY page."occurred_at" ${direction}, page."id" ${direction}`);
    if (rows.length === 0) return null;
    return rows.filter((row): row is EventRow => row.id !== null).map(eventFromRow);
  }

  private assertInTransaction(method: string): void {
    // A lock taken outside a transaction would be released at once and protect nothing.
    if (!this.unit) throw new Error(`${method} must be called inside store.transaction`);
  }

  async deleteEventsBefore(cutoff: Date, batchSize: number): Promise<number> {
    const batch = await this.client.lifecycleEvent.findMany({
      where: { occurredAt: { lt: cutoff } },
      select: { id: true },
      take: batchSize,
    });
    if (batch.length === 0) return 0;
    const { count } = await this.client.lifecycleEvent.deleteMany({ where: { id: { in: batch.map((e) => e.id) } } });
    return count;
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

  async insertEvents(events: readonly LifecycleEvent[]): Promise<void> {
    const positions = await this.takeLivePositions(events.length);
    let index = 0;
    for (const chunk of chunksOf(events, 8)) {
      await this.sql.run(Prisma.sql`
        INSERT INTO "lifecycle_events" ("id", "organization_id", "reference_id", "type", "occurred_at", "detail",
          "reference_tags", "position")
        VALUES ${Prisma.join(
          chunk.map(
            (event) =>
              Prisma.sql`(${event.id}, ${event.organizationId}, ${event.referenceId}, ${event.type},
                ${event.occurredAt}, ${this.json(event.detail)}, ${this.json(event.referenceTags)},
                ${this.livePosition(positions[index++])})`,
          ),
        )}`);
    }
    // As insertEvent: published once the unit of work commits (outside one, the inserts were their own commits).
    if (this.unit) this.unit.events.push(...events);
    else this.publishCommitted(events);
  }

  async insertWebhookDeliveries(deliveries: readonly WebhookDelivery[]): Promise<void> {
    for (const chunk of chunksOf(deliveries, 13)) {
      await this.sql.run(Prisma.sql`
        INSERT INTO "webhook_deliveries" ("id", "organization_id", "endpoint_id", "event_id", "event_type", "body",
          "status", "attempt_count", "next_attempt_at", "lease_owner", "lease_expires_at", "created_at", "updated_at")
        VALUES ${Prisma.join(
          chunk.map(
            (d) =>
              Prisma.sql`(${d.id}, ${d.organizationId}, ${d.endpointId}, ${d.eventId}, ${d.eventType}, ${d.body},
                ${d.status}, ${d.attemptCount}, ${d.nextAttemptAt}, ${d.leaseOwner}, ${d.leaseExpiresAt},
                ${d.createdAt}, ${d.updatedAt})`,
          ),
        )}`);
    }
  }
}

type LifecycleEventRow = Awaited<ReturnType<PrismaClient["lifecycleEvent"]["findFirstOrThrow"]>>;

/** A lifecycle_events row as the domain's event union (the type column decides the detail's shape). */
export function lifecycleEventFromRow(row: LifecycleEventRow): LifecycleEvent {
  return {
    id: row.id,
    organizationId: row.organizationId,
    referenceId: row.referenceId,
    type: row.type,
    occurredAt: row.occurredAt,
    detail: row.detail,
    referenceTags: row.referenceTags as unknown as TagSnapshot[],
  } as unknown as LifecycleEvent;
}

/** `items` cut in chunks of at most MAX_PARAMETERS_PER_STATEMENT parameters, `parametersPerItem` each. */
export function chunksOf<T>(items: readonly T[], parametersPerItem: number): T[][] {
  const size = Math.max(1, Math.floor(MAX_PARAMETERS_PER_STATEMENT / parametersPerItem));
  const chunks: T[][] = [];
  for (let start = 0; start < items.length; start += size) chunks.push(items.slice(start, start + size));
  return chunks;
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
