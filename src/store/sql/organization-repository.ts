import type { Organization } from "../../domain/models.ts";
import { parseStoredScopes, storedScopes } from "../../domain/organizations/api-key-scopes.ts";
import type {
  ApiKeyRecord,
  AuthenticatedApiKey,
  OrganizationRepository,
} from "../../domain/organizations/organization-repository.ts";
import type { Database } from "../database.ts";
import { toBoolean, toDate, toNullableDate } from "./rows.ts";
import type { SqlExecutor } from "./executor.ts";
import { Prisma } from "./sql-template.ts";
import { isOneOf } from "./value-lists.ts";

/*
 * The organizations and api_keys tables. Built by the unit of work (src/store/sql/sql-store.ts) on its executor:
 * inside `store.transaction`, statements run in that transaction.
 */

const API_KEY_COLUMNS = Prisma.raw(
  `"id", "organization_id", "key_hash", "key_prefix", "created_at", "revoked_at", "trusted_documents_only", ` +
    `"budget_maximum", "budget_restore_rate", "name", "scopes", "expires_at", "last_used_at"`,
);

interface ApiKeyRow {
  readonly id: string;
  readonly organization_id: string;
  readonly key_hash: string;
  readonly key_prefix: string;
  readonly created_at: unknown;
  readonly revoked_at: unknown;
  readonly trusted_documents_only: unknown;
  readonly budget_maximum: number | null;
  readonly budget_restore_rate: number | null;
  readonly name: string;
  readonly scopes: string;
  readonly expires_at: unknown;
  readonly last_used_at: unknown;
}

function apiKeyFromRow(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    organizationId: row.organization_id,
    keyHash: row.key_hash,
    keyPrefix: row.key_prefix,
    createdAt: toDate(row.created_at),
    revokedAt: toNullableDate(row.revoked_at),
    trustedDocumentsOnly: toBoolean(row.trusted_documents_only),
    budget: budgetFromRow(row),
    name: row.name,
    scopes: parseStoredScopes(row.scopes),
    expiresAt: toNullableDate(row.expires_at),
    lastUsedAt: toNullableDate(row.last_used_at),
  };
}

/** A key's own cost budget (migration 0018): REAL / DOUBLE PRECISION, NULL where the server's default applies. */
function budgetFromRow(row: {
  readonly budget_maximum: unknown;
  readonly budget_restore_rate: unknown;
}): ApiKeyRecord["budget"] {
  return {
    maximum: row.budget_maximum === null ? null : Number(row.budget_maximum),
    restoreRate: row.budget_restore_rate === null ? null : Number(row.budget_restore_rate),
  };
}

export class SqlOrganizationRepository implements OrganizationRepository {
  constructor(
    private readonly database: Database,
    /** Runs every statement: the driver, or the transaction of the unit of work that built this repository. */
    private readonly sql: SqlExecutor,
    /** Whether `sql` runs in a transaction: locks are taken only inside one. */
    private readonly inTransaction: boolean,
  ) {}

  async insertOrganization(organization: Organization): Promise<void> {
    const { id, name, createdAt } = organization;
    await this.sql.run(Prisma.sql`
      INSERT INTO "organizations" ("id", "name", "created_at") VALUES (${id}, ${name}, ${createdAt})`);
  }

  async countOrganizations(): Promise<number> {
    const [row] = await this.sql.all<{ n: number | bigint }>(Prisma.sql`SELECT COUNT(*) AS "n" FROM "organizations"`);
    return Number(row?.n ?? 0);
  }

  async findOrganization(id: string): Promise<Organization | null> {
    const [row] = await this.sql.all<{ id: string; name: string; created_at: unknown }>(Prisma.sql`
      SELECT "id", "name", "created_at" FROM "organizations" WHERE "id" = ${id}`);
    return row ? { id: row.id, name: row.name, createdAt: toDate(row.created_at) } : null;
  }

  async listOrganizations(): Promise<Organization[]> {
    const rows = await this.sql.all<{ id: string; name: string; created_at: unknown }>(Prisma.sql`
      SELECT "id", "name", "created_at" FROM "organizations" ORDER BY "created_at", "id"`);
    return rows.map((row) => ({ id: row.id, name: row.name, createdAt: toDate(row.created_at) }));
  }

  async listApiKeys(organizationId: string): Promise<ApiKeyRecord[]> {
    const rows = await this.sql.all<ApiKeyRow>(Prisma.sql`
      SELECT ${API_KEY_COLUMNS} FROM "api_keys" WHERE "organization_id" = ${organizationId} ORDER BY "created_at", "id"`);
    return rows.map(apiKeyFromRow);
  }

  async lockOrganization(organizationId: string): Promise<void> {
    this.assertInTransaction("lockOrganization");
    if (this.database.provider !== "postgres") {
      // SQLite runs one write transaction at a time, but a transaction starts as a reader: one that counts first
      // and writes after fails at once (SQLITE_BUSY_SNAPSHOT, no busy timeout) when another process — the server
      // beside the reftrail command — committed in between. A write that changes nothing takes the write lock
      // first (waiting out the busy timeout), so the count that follows sees the last commit and nothing can come
      // between it and the write. It must be the transaction's first statement.
      await this.sql.run(Prisma.sql`UPDATE "organizations" SET "id" = "id" WHERE 0`);
      return;
    }
    // NO KEY UPDATE, not UPDATE: it still serializes lockers but lets inserts that reference the organization
    // (API keys) check their foreign key without waiting.
    await this.sql.all(Prisma.sql`SELECT 1 FROM "organizations" WHERE "id" = ${organizationId} FOR NO KEY UPDATE`);
  }

  async insertApiKey(key: ApiKeyRecord): Promise<void> {
    await this.sql.run(Prisma.sql`
      INSERT INTO "api_keys" ("id", "organization_id", "key_hash", "key_prefix", "created_at", "revoked_at",
        "trusted_documents_only", "budget_maximum", "budget_restore_rate", "name", "scopes", "expires_at", "last_used_at")
      VALUES (${key.id}, ${key.organizationId}, ${key.keyHash}, ${key.keyPrefix}, ${key.createdAt}, ${key.revokedAt},
        ${key.trustedDocumentsOnly}, ${key.budget.maximum}, ${key.budget.restoreRate}, ${key.name},
        ${storedScopes(key.scopes)}, ${key.expiresAt}, ${key.lastUsedAt})`);
  }

  async findApiKey(id: string): Promise<ApiKeyRecord | null> {
    const [row] = await this.sql.all<ApiKeyRow>(
      Prisma.sql`SELECT ${API_KEY_COLUMNS} FROM "api_keys" WHERE "id" = ${id}`,
    );
    return row ? apiKeyFromRow(row) : null;
  }

  async updateApiKeyBudget(id: string, budget: ApiKeyRecord["budget"]): Promise<ApiKeyRecord | null> {
    await this.sql.run(Prisma.sql`
      UPDATE "api_keys" SET "budget_maximum" = ${budget.maximum}, "budget_restore_rate" = ${budget.restoreRate}
      WHERE "id" = ${id}`);
    return this.findApiKey(id);
  }

  async findActiveApiKeysByHash(keyHashes: readonly string[], retentionCutoff: Date): Promise<AuthenticatedApiKey[]> {
    // Every authenticated request starts here, batched with the others of the same event-loop turn, in one
    // statement: the unique key_hash index, the version's primary key (raised by triggers, migration 0007; an
    // organization that never changed has none) and one seek in the (organization_id, occurred_at, id) index of
    // the log per key. Only what authentication needs, read on every request.
    if (keyHashes.length === 0) return [];
    const rows = await this.sql.all<{
      id: string;
      key_hash: string;
      organization_id: string;
      trusted_documents_only: unknown;
      data_version: unknown;
      oldest_visible_event_at: unknown;
      budget_maximum: unknown;
      budget_restore_rate: unknown;
      key_prefix: string;
      scopes: string;
      expires_at: unknown;
      last_used_at: unknown;
    }>(Prisma.sql`
      SELECT k."id", k."key_hash", k."organization_id", k."trusted_documents_only", COALESCE(v."version", 0) AS "data_version",
        k."budget_maximum", k."budget_restore_rate", k."key_prefix", k."scopes", k."expires_at", k."last_used_at",
        (SELECT MIN(e."occurred_at") FROM "lifecycle_events" e
         WHERE ${this.eventOrganization()} AND e."occurred_at" >= ${retentionCutoff}) AS "oldest_visible_event_at"
      FROM "api_keys" k LEFT JOIN "organization_data_versions" v ON v."organization_id" = k."organization_id"
      WHERE ${isOneOf(this.database.provider, Prisma.sql`k."key_hash"`, keyHashes)} AND k."revoked_at" IS NULL`);
    return rows.map((row) => ({
      id: row.id,
      keyHash: row.key_hash,
      organizationId: row.organization_id,
      trustedDocumentsOnly: toBoolean(row.trusted_documents_only),
      dataVersion: Number(row.data_version),
      oldestVisibleEventAt: toNullableDate(row.oldest_visible_event_at),
      budget: budgetFromRow(row),
      keyPrefix: row.key_prefix,
      scopes: parseStoredScopes(row.scopes),
      expiresAt: toNullableDate(row.expires_at),
      lastUsedAt: toNullableDate(row.last_used_at),
    }));
  }

  async recordApiKeyUse(id: string, at: Date, notBefore: Date): Promise<void> {
    await this.sql.run(Prisma.sql`
      UPDATE "api_keys" SET "last_used_at" = ${at}
      WHERE "id" = ${id} AND ("last_used_at" IS NULL OR "last_used_at" < ${notBefore})`);
  }

  async revokeApiKey(id: string, at: Date): Promise<ApiKeyRecord | null> {
    // Revoked once: a second revocation keeps the first time.
    await this.sql.run(Prisma.sql`
      UPDATE "api_keys" SET "revoked_at" = ${at} WHERE "id" = ${id} AND "revoked_at" IS NULL`);
    const [row] = await this.sql.all<ApiKeyRow>(
      Prisma.sql`SELECT ${API_KEY_COLUMNS} FROM "api_keys" WHERE "id" = ${id}`,
    );
    return row ? apiKeyFromRow(row) : null;
  }

  async updateTrustedDocumentsOnly(id: string, trustedDocumentsOnly: boolean): Promise<ApiKeyRecord | null> {
    const [row] = await this.sql.all<ApiKeyRow>(Prisma.sql`
      UPDATE "api_keys" SET "trusted_documents_only" = ${trustedDocumentsOnly} WHERE "id" = ${id}
      RETURNING ${API_KEY_COLUMNS}`);
    return row ? apiKeyFromRow(row) : null;
  }

  /**
   * The log's row `e` is of the organization of `k`. On PostgreSQL as the (organization_id, occurred_at, id)
   * index holds it, a uuid value (migration 0016): the oldest visible event is that index's first entry in the
   * oldest month that has one.
   */
  private eventOrganization(): Prisma.Sql {
    return this.database.provider === "postgres"
      ? Prisma.sql`e."organization_id"::uuid = k."organization_id"::uuid`
      : Prisma.sql`e."organization_id" = k."organization_id"`;
  }

  private assertInTransaction(method: string): void {
    // A lock taken outside a transaction would be released at once and protect nothing.
    if (!this.inTransaction) throw new Error(`${method} must be called inside store.transaction`);
  }
}
