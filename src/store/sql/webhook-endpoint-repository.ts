import type { LifecycleEventType } from "../../domain/lifecycle/lifecycle-event.ts";
import type { EndpointRoute, WebhookEndpoint, WebhookOrdering } from "../../domain/webhooks/webhook-models.ts";
import type { DatabaseProvider } from "../database.ts";
import { ENCRYPTED_PREFIX, type SecretCipher } from "../secret-cipher.ts";
import type { SqlExecutor } from "./executor.ts";
import { findInChunks } from "./in-chunks.ts";
import { fromJson, timestampParameter, toBoolean } from "./rows.ts";
import {
  ENDPOINT_COLUMNS,
  toEndpointFromColumns,
  toStoredEndpointColumns,
  type EndpointColumns,
} from "./webhook-endpoint-rows.ts";
import type { EndpointChange } from "./endpoint-start-gate.ts";
import { Prisma } from "./sql-template.ts";
import { isOneOf } from "./value-lists.ts";
import { literalLimit } from "./literal-limit.ts";

/*
 * The "webhook_endpoints" table with its tag filter rows ("webhook_endpoint_tags"): the endpoints an
 * organization manages, and their health as the delivery worker records it. Part of the webhook repository
 * (src/store/sql/webhook-repository.ts); every statement runs on the executor it is given.
 */

export class SqlWebhookEndpointRepository {
  constructor(
    private readonly provider: DatabaseProvider,
    /** Runs every statement: the driver, or the transaction of the unit of work that built this repository. */
    private readonly sql: SqlExecutor,
    /** Encrypts signing secrets on the way in, decrypts them on the way out: the domain sees plain secrets. */
    private readonly secrets: SecretCipher,
    /** Told each endpoint a statement changed (its new version) or deleted: see endpoint-start-gate.ts. */
    private readonly onEndpointsChanged: (changes: readonly EndpointChange[]) => void = () => {},
  ) {}

  /**
   * Encrypts the secrets of endpoints stored before encryption existed (plain `whsec_` values), at start-up.
   * Each row is rewritten only if it still holds what was read, so a concurrent rotation on another instance is
   * never overwritten. Returns how many endpoints were rewritten.
   */
  async encryptPlaintextSecrets(): Promise<number> {
    const encrypted = `${ENCRYPTED_PREFIX}%`;
    const rows = await this.sql.all<EndpointColumns>(Prisma.sql`
      SELECT ${ENDPOINT_COLUMNS} FROM "webhook_endpoints" e
      WHERE NOT (e."secret" LIKE ${encrypted})
        OR (e."previous_secret" IS NOT NULL AND NOT (e."previous_secret" LIKE ${encrypted}))`);
    let rewritten = 0;
    for (const row of rows) {
      const endpoint = toEndpointFromColumns(row, [], this.secrets);
      const { secret, previousSecrets } = toStoredEndpointColumns(endpoint, this.provider, this.secrets);
      const unchanged =
        row.previous_secret === null
          ? Prisma.sql`"previous_secret" IS NULL`
          : Prisma.sql`"previous_secret" = ${row.previous_secret}`;
      rewritten += await this.sql.run(Prisma.sql`
        UPDATE "webhook_endpoints" SET "secret" = ${secret}, "previous_secret" = ${previousSecrets}
        WHERE "id" = ${row.id} AND "secret" = ${row.secret} AND ${unchanged}`);
    }
    return rewritten;
  }

  async insertEndpoint(endpoint: WebhookEndpoint): Promise<void> {
    const stored = toStoredEndpointColumns(endpoint, this.provider, this.secrets);
    await this.sql.run(Prisma.sql`
      INSERT INTO "webhook_endpoints" ("id", "organization_id", "url", "event_types", "description", "enabled",
        "disabled_reason", "secret", "previous_secret", "previous_secret_expires_at", "failing_since",
        "tag_filtered", "ordering", "created_at", "updated_at", "signing", "public_key",
        "max_deliveries_per_second", "destination")
      VALUES (${endpoint.id}, ${endpoint.organizationId}, ${stored.url}, ${stored.eventTypes},
        ${endpoint.description}, ${endpoint.enabled}, ${endpoint.disabledReason}, ${stored.secret},
        ${stored.previousSecrets}, ${endpoint.previousSecretExpiresAt}, ${endpoint.failingSince},
        ${stored.tagFiltered}, ${endpoint.ordering}, ${endpoint.createdAt}, ${endpoint.updatedAt},
        ${endpoint.signing}, ${endpoint.publicKey}, ${endpoint.maxDeliveriesPerSecond}, ${stored.destination})`);
    if (endpoint.maxDeliveriesPerSecond !== null) await this.writeThrottle(endpoint);
  }

  /**
   * A throttled endpoint has its schedule row (the claim gives slots from it and leases nothing for an endpoint
   * without one); an unthrottled one has none. Written in the transaction that writes the setting; a row kept
   * across a change of the rate keeps its schedule (slots already given stay given).
   */
  private async writeThrottle(endpoint: WebhookEndpoint): Promise<void> {
    if (endpoint.maxDeliveriesPerSecond === null)
      await this.sql.run(Prisma.sql`DELETE FROM "webhook_endpoint_throttles" WHERE "endpoint_id" = ${endpoint.id}`);
    else
      await this.sql.run(Prisma.sql`
        INSERT INTO "webhook_endpoint_throttles" ("endpoint_id", "theoretical_arrival_us")
        VALUES (${endpoint.id}, 0) ON CONFLICT ("endpoint_id") DO NOTHING`);
  }

  /** Writes the endpoint's fields and raises its version (whatever `endpoint.version` says). */
  async updateEndpoint(endpoint: WebhookEndpoint): Promise<void> {
    const stored = toStoredEndpointColumns(endpoint, this.provider, this.secrets);
    const rows = await this.sql.all<{ id: string; version: number | bigint }>(Prisma.sql`
      UPDATE "webhook_endpoints" SET "url" = ${stored.url}, "event_types" = ${stored.eventTypes},
        "description" = ${endpoint.description}, "enabled" = ${endpoint.enabled},
        "disabled_reason" = ${endpoint.disabledReason}, "secret" = ${stored.secret},
        "previous_secret" = ${stored.previousSecrets},
        "previous_secret_expires_at" = ${endpoint.previousSecretExpiresAt},
        "failing_since" = ${endpoint.failingSince}, "tag_filtered" = ${stored.tagFiltered},
        "ordering" = ${endpoint.ordering}, "updated_at" = ${endpoint.updatedAt}, "version" = "version" + 1,
        "public_key" = ${endpoint.publicKey}, "max_deliveries_per_second" = ${endpoint.maxDeliveriesPerSecond},
        "destination" = ${stored.destination}
      WHERE "id" = ${endpoint.id} AND "organization_id" = ${endpoint.organizationId}
      RETURNING "id", "version"`);
    if (rows.length > 0) await this.writeThrottle(endpoint);
    this.onEndpointsChanged(rows.map((row) => ({ id: row.id, version: Number(row.version) })));
  }

  async deleteEndpoint(organizationId: string, id: string): Promise<boolean> {
    const [endpoint] = await this.sql.all<{ id: string }>(Prisma.sql`
      SELECT "id" FROM "webhook_endpoints" WHERE "id" = ${id} AND "organization_id" = ${organizationId}`);
    if (!endpoint) return false;
    // Attempts go with their deliveries (ON DELETE CASCADE); deliveries have no foreign key to the endpoint.
    await this.sql.run(Prisma.sql`DELETE FROM "webhook_deliveries" WHERE "endpoint_id" = ${id}`);
    await this.sql.run(Prisma.sql`DELETE FROM "webhook_endpoints" WHERE "id" = ${id}`);
    this.onEndpointsChanged([{ id, version: null }]);
    return true;
  }

  async replaceEndpointTags(organizationId: string, endpointId: string, tagIds: readonly string[]): Promise<string[]> {
    // PostgreSQL: the tags first, FOR KEY SHARE (the lock the foreign key check of a filter row takes), then the
    // filter rows, the store's lock order (src/store/sql/sql-store.ts). A tag's deletion holds the tag and then
    // deletes its filter rows (ON DELETE CASCADE): with this endpoint's rows deleted first and the tag's check
    // waiting for the deletion, the two waited for each other. A tag deleted meanwhile is not locked, and the
    // insert below, a statement of its own, no longer sees it.
    if (this.provider === "postgres" && tagIds.length > 0) {
      await this.sql.all(Prisma.sql`
        SELECT t."id" FROM "tags" t
        WHERE t."organization_id" = ${organizationId} AND t."id" IN (${Prisma.join([...tagIds])})
        ORDER BY t."id"
        FOR KEY SHARE`);
    }
    await this.sql.run(Prisma.sql`DELETE FROM "webhook_endpoint_tags" WHERE "endpoint_id" = ${endpointId}`);
    if (tagIds.length === 0) return [];
    // The organization's tags among the ids, chosen by the database in the insert itself: an id of another
    // organization, unknown, or deleted by a concurrent transaction is simply not written.
    const rows = await this.sql.all<{ tag_id: string }>(Prisma.sql`
      INSERT INTO "webhook_endpoint_tags" ("endpoint_id", "tag_id")
      SELECT CAST(${endpointId} AS TEXT), t."id" FROM "tags" t
      WHERE t."organization_id" = ${organizationId} AND ${isOneOf(this.provider, Prisma.sql`t."id"`, tagIds)}
      RETURNING "tag_id"`);
    return rows.map((row) => row.tag_id);
  }

  async findEndpoint(organizationId: string, id: string): Promise<WebhookEndpoint | null> {
    const [endpoint] = await this.findEndpointsWithTags(
      Prisma.sql`e."id" = ${id} AND e."organization_id" = ${organizationId}`,
      Prisma.sql`e."id"`,
    );
    return endpoint ?? null;
  }

  async lockEndpoint(organizationId: string, id: string): Promise<WebhookEndpoint | null> {
    // SQLite runs one write transaction at a time: nothing to lock. On PostgreSQL, the lock an UPDATE of non-key
    // columns takes, before the read (which also brings the tag filter along).
    if (this.provider === "postgres") {
      await this.sql.all(Prisma.sql`
        SELECT 1 FROM "webhook_endpoints" WHERE "id" = ${id} AND "organization_id" = ${organizationId}
        FOR NO KEY UPDATE`);
    }
    return this.findEndpoint(organizationId, id);
  }

  findEndpointsByIds(ids: readonly string[]): Promise<WebhookEndpoint[]> {
    if (ids.length === 0) return Promise.resolve([]);
    // The worker reads its endpoints after every claim: one statement per chunk of ids.
    return findInChunks(ids, (chunk) =>
      this.findEndpointsWithTags(isOneOf(this.provider, Prisma.sql`e."id"`, chunk), Prisma.sql`e."id"`),
    );
  }

  async countEndpoints(organizationId: string): Promise<number> {
    const [row] = await this.sql.all<{ n: number | bigint }>(Prisma.sql`
      SELECT COUNT(*) AS "n" FROM "webhook_endpoints" WHERE "organization_id" = ${organizationId}`);
    return Number(row?.n ?? 0);
  }

  listEndpoints(organizationId: string, beforeId: string | undefined, limit: number): Promise<WebhookEndpoint[]> {
    // The page is picked by its own keyset subquery; the statement around it brings the tags along.
    const before = beforeId ? Prisma.sql`AND "id" < ${beforeId}` : Prisma.empty;
    return this.findEndpointsWithTags(
      Prisma.sql`e."id" IN (
        SELECT "id" FROM "webhook_endpoints" WHERE "organization_id" = ${organizationId} ${before}
        ORDER BY "id" DESC LIMIT ${literalLimit(limit)})`,
      Prisma.sql`e."id" DESC`,
    );
  }

  /**
   * The endpoints `where` picks (on `e`), each with its tag filter: one statement, one row per (endpoint, tag),
   * folded here. `order` orders the endpoints; the tag ids of each come in ascending order.
   */
  private async findEndpointsWithTags(where: Prisma.Sql, order: Prisma.Sql): Promise<WebhookEndpoint[]> {
    const rows = await this.sql.all<EndpointColumns & { tag_id: string | null }>(Prisma.sql`
      SELECT ${ENDPOINT_COLUMNS}, et."tag_id"
      FROM "webhook_endpoints" e LEFT JOIN "webhook_endpoint_tags" et ON et."endpoint_id" = e."id"
      WHERE ${where}
      ORDER BY ${order}, et."tag_id"`);
    const endpoints = new Map<string, { row: EndpointColumns; tagIds: string[] }>();
    for (const row of rows) {
      let endpoint = endpoints.get(row.id);
      if (!endpoint) endpoints.set(row.id, (endpoint = { row, tagIds: [] }));
      if (row.tag_id !== null) endpoint.tagIds.push(row.tag_id);
    }
    return [...endpoints.values()].map(({ row, tagIds }) => toEndpointFromColumns(row, tagIds, this.secrets));
  }

  async findEnabledEndpoints(organizationId: string): Promise<EndpointRoute[]> {
    // One statement: the endpoints with their tag ids, one row per (endpoint, tag), folded below.
    const rows = await this.sql.all<{
      id: string;
      event_types: unknown;
      tag_filtered: unknown;
      ordering: string;
      tag_id: string | null;
    }>(
      Prisma.sql`
      SELECT e."id", e."event_types", e."tag_filtered", e."ordering", et."tag_id"
      FROM "webhook_endpoints" e LEFT JOIN "webhook_endpoint_tags" et ON et."endpoint_id" = e."id"
      WHERE e."organization_id" = ${organizationId} AND e."enabled" = ${true}`,
    );
    const routes = new Map<
      string,
      { id: string; eventTypes: LifecycleEventType[] | null; tagIds: string[] | null; ordering: WebhookOrdering }
    >();
    for (const row of rows) {
      let route = routes.get(row.id);
      if (!route) {
        route = {
          id: row.id,
          eventTypes: (fromJson(row.event_types) as LifecycleEventType[] | null) ?? null,
          tagIds: toBoolean(row.tag_filtered) ? [] : null,
          ordering: row.ordering as WebhookOrdering,
        };
        routes.set(row.id, route);
      }
      if (row.tag_id !== null) route.tagIds?.push(row.tag_id);
    }
    return [...routes.values()];
  }

  async markEndpointsFailing(since: ReadonlyMap<string, Date>): Promise<void> {
    if (since.size === 0) return;
    const entries = [...since];
    await this.sql.run(Prisma.sql`
      UPDATE "webhook_endpoints" SET "failing_since" = CASE "id" ${Prisma.join(
        entries.map(([id, at]) => Prisma.sql`WHEN ${id} THEN ${timestampParameter(this.provider, at)}`),
        " ",
      )} END
      WHERE "id" IN (${Prisma.join(entries.map(([id]) => id))}) AND "failing_since" IS NULL`);
  }

  async markEndpointsHealthy(ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await this.sql.run(Prisma.sql`
      UPDATE "webhook_endpoints" SET "failing_since" = NULL
      WHERE "id" IN (${Prisma.join([...ids])}) AND "failing_since" IS NOT NULL`);
  }

  async disableEndpoints(
    ids: readonly string[],
    reason: string,
    at: Date,
    failingSinceAtOrBefore?: Date,
  ): Promise<string[]> {
    if (ids.length === 0) return [];
    const streak = failingSinceAtOrBefore ? Prisma.sql`AND "failing_since" <= ${failingSinceAtOrBefore}` : Prisma.empty;
    const rows = await this.sql.all<{ id: string; version: number | bigint }>(Prisma.sql`
      UPDATE "webhook_endpoints" SET "enabled" = ${false}, "disabled_reason" = ${reason}, "updated_at" = ${at},
        "version" = "version" + 1
      WHERE "id" IN (${Prisma.join([...ids])}) AND "enabled" = ${true} ${streak}
      RETURNING "id", "version"`);
    this.onEndpointsChanged(rows.map((row) => ({ id: row.id, version: Number(row.version) })));
    return rows.map((row) => row.id);
  }
}
