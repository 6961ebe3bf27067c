import { findInChunks } from "./in-chunks.ts";
import type { LifecycleEventType } from "../../domain/lifecycle/lifecycle-event.ts";
import type {
  EndpointRoute,
  PreviousSecret,
  WebhookOrdering,
  WebhookAttempt,
  WebhookDelivery,
  WebhookEndpoint,
} from "../../domain/webhooks/webhook-models.ts";
import type {
  ClaimRequest,
  DeliveryListQuery,
  FinishedAttempt,
  WebhookRepository,
} from "../../domain/webhooks/webhook-repository.ts";
import type { DatabaseProvider } from "../database.ts";
import { chunksOf, fromJson, toBoolean, toDate, toNullableDate } from "./rows.ts";
import { ENCRYPTED_PREFIX, isEncrypted, type SecretCipher } from "../secret-cipher.ts";
import type { SqlExecutor } from "./executor.ts";
import { Prisma } from "../__generated__/sqlite/client.ts";
import { DELIVERY_COLUMNS, toDeliveryFromColumns, type DeliveryColumns } from "./webhook-delivery-rows.ts";
import { pendingPredecessorIsAbsent } from "./webhook-ordering-queries.ts";

/*
 * The webhook tables, in raw SQL on the executor this repository is given: the driver, or the transaction of the
 * unit of work that built it (`store.transaction(...)`), so that methods changing several rows run in the
 * caller's transaction.
 */

/** An endpoint as a raw statement reads it (column names; the driver's types, see src/store/sql/rows.ts). */
interface EndpointColumns {
  readonly id: string;
  readonly organization_id: string;
  readonly url: string;
  readonly event_types: unknown;
  readonly description: string | null;
  readonly enabled: unknown;
  readonly disabled_reason: string | null;
  readonly secret: string;
  readonly previous_secret: string | null;
  readonly previous_secret_expires_at: unknown;
  readonly failing_since: unknown;
  readonly tag_filtered: unknown;
  readonly ordering: string;
  readonly created_at: unknown;
  readonly updated_at: unknown;
}

/** Every column of an endpoint `e`, as `EndpointColumns` reads them. */
const ENDPOINT_COLUMNS = Prisma.sql`e."id", e."organization_id", e."url", e."event_types", e."description",
  e."enabled", e."disabled_reason", e."secret", e."previous_secret", e."previous_secret_expires_at",
  e."failing_since", e."tag_filtered", e."ordering", e."created_at", e."updated_at"`;

/** The stored list of secrets rotated out, as written by `storedColumns`. */
interface StoredPreviousSecret {
  readonly secret: string;
  readonly expires_at: string;
}

/** An attempt as a raw statement reads it. */
interface AttemptColumns {
  readonly id: string;
  readonly delivery_id: string;
  readonly attempted_at: unknown;
  readonly status_code: number | null;
  readonly error: string | null;
  readonly latency_ms: number;
  readonly response_body: string | null;
}

const ATTEMPT_COLUMNS = Prisma.sql`a."id", a."delivery_id", a."attempted_at", a."status_code", a."error",
  a."latency_ms", a."response_body"`;

function toAttempt(row: AttemptColumns): WebhookAttempt {
  return {
    id: row.id,
    deliveryId: row.delivery_id,
    attemptedAt: toDate(row.attempted_at),
    statusCode: row.status_code === null ? null : Number(row.status_code),
    error: row.error,
    latencyMs: Number(row.latency_ms),
    responseBody: row.response_body,
  };
}

export class SqlWebhookRepository implements WebhookRepository {
  constructor(
    private readonly provider: DatabaseProvider,
    /** Runs every statement: the driver, or the transaction of the unit of work that built this repository. */
    private readonly sql: SqlExecutor,
    /** Encrypts signing secrets on the way in, decrypts them on the way out: the domain sees plain secrets. */
    private readonly secrets: SecretCipher,
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
      const { secret, previousSecrets } = this.storedColumns(this.toEndpoint(row, []));
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
    const stored = this.storedColumns(endpoint);
    await this.sql.run(Prisma.sql`
      INSERT INTO "webhook_endpoints" ("id", "organization_id", "url", "event_types", "description", "enabled",
        "disabled_reason", "secret", "previous_secret", "previous_secret_expires_at", "failing_since",
        "tag_filtered", "ordering", "created_at", "updated_at")
      VALUES (${endpoint.id}, ${endpoint.organizationId}, ${endpoint.url}, ${stored.eventTypes},
        ${endpoint.description}, ${endpoint.enabled}, ${endpoint.disabledReason}, ${stored.secret},
        ${stored.previousSecrets}, ${endpoint.previousSecretExpiresAt}, ${endpoint.failingSince},
        ${stored.tagFiltered}, ${endpoint.ordering}, ${endpoint.createdAt}, ${endpoint.updatedAt})`);
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

  async findEndpointsByIds(ids: readonly string[]): Promise<WebhookEndpoint[]> {
    if (ids.length === 0) return [];
    // The worker reads its endpoints after every claim: one statement per chunk of ids.
    return findInChunks(ids, (chunk) =>
      this.findEndpointsWithTags(Prisma.sql`e."id" IN (${Prisma.join(chunk)})`, Prisma.sql`e."id"`),
    );
  }

  /**
   * The endpoints `where` picks (on `e`), each with its tag filter: one statement, one row per (endpoint, tag),
   * folded here. `order` orders the endpoints; their tag ids come in ascending order.
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
    return [...endpoints.values()].map(({ row, tagIds }) => this.toEndpoint(row, tagIds));
  }

  async replaceEndpointTags(organizationId: string, endpointId: string, tagIds: readonly string[]): Promise<string[]> {
    await this.sql.run(Prisma.sql`DELETE FROM "webhook_endpoint_tags" WHERE "endpoint_id" = ${endpointId}`);
    if (tagIds.length === 0) return [];
    // The organization's tags among the ids, chosen by the database in the insert itself: an id of another
    // organization, unknown, or deleted by a concurrent transaction is simply not written.
    const rows = await this.sql.all<{ tag_id: string }>(Prisma.sql`
      INSERT INTO "webhook_endpoint_tags" ("endpoint_id", "tag_id")
      SELECT CAST(${endpointId} AS TEXT), t."id" FROM "tags" t
      WHERE t."organization_id" = ${organizationId} AND t."id" IN (${Prisma.join([...tagIds])})
      RETURNING "tag_id"`);
    return rows.map((row) => row.tag_id);
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

  async countEndpoints(organizationId: string): Promise<number> {
    const [row] = await this.sql.all<{ n: number | bigint }>(Prisma.sql`
      SELECT COUNT(*) AS "n" FROM "webhook_endpoints" WHERE "organization_id" = ${organizationId}`);
    return Number(row?.n ?? 0);
  }

  listEndpoints(organizationId: string, beforeId: string | undefined, limit: number): Promise<WebhookEndpoint[]> {
    // The page is chosen by its own keyset statement inside the one that brings the tags along.
    const before = beforeId ? Prisma.sql`AND "id" < ${beforeId}` : Prisma.empty;
    return this.findEndpointsWithTags(
      Prisma.sql`e."id" IN (
        SELECT "id" FROM "webhook_endpoints" WHERE "organization_id" = ${organizationId} ${before}
        ORDER BY "id" DESC LIMIT ${limit})`,
      Prisma.sql`e."id" DESC`,
    );
  }

  async updateEndpoint(endpoint: WebhookEndpoint): Promise<void> {
    const stored = this.storedColumns(endpoint);
    await this.sql.run(Prisma.sql`
      UPDATE "webhook_endpoints" SET "url" = ${endpoint.url}, "event_types" = ${stored.eventTypes},
        "description" = ${endpoint.description}, "enabled" = ${endpoint.enabled},
        "disabled_reason" = ${endpoint.disabledReason}, "secret" = ${stored.secret},
        "previous_secret" = ${stored.previousSecrets}, "previous_secret_expires_at" = ${endpoint.previousSecretExpiresAt},
        "failing_since" = ${endpoint.failingSince}, "tag_filtered" = ${stored.tagFiltered},
        "ordering" = ${endpoint.ordering}, "updated_at" = ${endpoint.updatedAt}
      WHERE "id" = ${endpoint.id} AND "organization_id" = ${endpoint.organizationId}`);
  }

  async deleteEndpoint(organizationId: string, id: string): Promise<boolean> {
    const [endpoint] = await this.sql.all<{ id: string }>(Prisma.sql`
      SELECT "id" FROM "webhook_endpoints" WHERE "id" = ${id} AND "organization_id" = ${organizationId}`);
    if (!endpoint) return false;
    // Attempts go with their deliveries (ON DELETE CASCADE); deliveries have no foreign key to the endpoint.
    await this.sql.run(Prisma.sql`DELETE FROM "webhook_deliveries" WHERE "endpoint_id" = ${id}`);
    await this.sql.run(Prisma.sql`DELETE FROM "webhook_endpoints" WHERE "id" = ${id}`);
    return true;
  }

  async insertDeliveries(deliveries: readonly WebhookDelivery[]): Promise<void> {
    // One multi-row INSERT per chunk of parameters (one chunk for any realistic number of endpoints).
    for (const chunk of chunksOf(deliveries, 15)) {
      await this.sql.run(Prisma.sql`
        INSERT INTO "webhook_deliveries" ("id", "organization_id", "endpoint_id", "event_id", "event_type", "body",
          "status", "attempt_count", "next_attempt_at", "lease_owner", "lease_expires_at", "created_at", "updated_at",
          "ordering_key", "event_occurred_at")
        VALUES ${Prisma.join(
          chunk.map(
            (d) => Prisma.sql`(${d.id}, ${d.organizationId}, ${d.endpointId}, ${d.eventId}, ${d.eventType}, ${d.body},
              ${d.status}, ${d.attemptCount}, ${d.nextAttemptAt}, ${d.leaseOwner}, ${d.leaseExpiresAt}, ${d.createdAt},
              ${d.updatedAt}, ${d.orderingKey}, ${d.eventOccurredAt})`,
          ),
        )}`);
    }
  }

  async findDelivery(organizationId: string, id: string): Promise<WebhookDelivery | null> {
    const [row] = await this.sql.all<DeliveryColumns>(Prisma.sql`
      SELECT ${DELIVERY_COLUMNS} FROM "webhook_deliveries" WHERE "id" = ${id} AND "organization_id" = ${organizationId}`);
    return row ? toDeliveryFromColumns(row) : null;
  }

  async findDeliveriesByIds(organizationId: string, ids: readonly string[]): Promise<WebhookDelivery[]> {
    if (ids.length === 0) return [];
    const rows = await findInChunks(ids, (chunk) =>
      this.sql.all<DeliveryColumns>(Prisma.sql`
        SELECT ${DELIVERY_COLUMNS} FROM "webhook_deliveries"
        WHERE "organization_id" = ${organizationId} AND "id" IN (${Prisma.join(chunk)})`),
    );
    return rows.map(toDeliveryFromColumns);
  }

  async findAttemptsByIds(organizationId: string, ids: readonly string[]): Promise<WebhookAttempt[]> {
    if (ids.length === 0) return [];
    const rows = await findInChunks(ids, (chunk) =>
      this.sql.all<AttemptColumns>(Prisma.sql`
        SELECT ${ATTEMPT_COLUMNS} FROM "webhook_attempts" a
        JOIN "webhook_deliveries" d ON d."id" = a."delivery_id"
        WHERE a."id" IN (${Prisma.join(chunk)}) AND d."organization_id" = ${organizationId}`),
    );
    return rows.map(toAttempt);
  }

  async listDeliveries(query: DeliveryListQuery): Promise<WebhookDelivery[]> {
    const status = query.status ? Prisma.sql`AND "status" = ${query.status}` : Prisma.empty;
    const before = query.beforeId ? Prisma.sql`AND "id" < ${query.beforeId}` : Prisma.empty;
    const rows = await this.sql.all<DeliveryColumns>(Prisma.sql`
      SELECT ${DELIVERY_COLUMNS} FROM "webhook_deliveries"
      WHERE "endpoint_id" = ${query.endpointId} ${status} ${before}
      ORDER BY "id" DESC LIMIT ${query.limit}`);
    return rows.map(toDeliveryFromColumns);
  }

  async findAttemptsByDeliveryIds(deliveryIds: readonly string[]): Promise<Map<string, WebhookAttempt[]>> {
    const byDelivery = new Map<string, WebhookAttempt[]>(deliveryIds.map((id) => [id, []]));
    if (deliveryIds.length === 0) return byDelivery;
    const rows = await findInChunks(deliveryIds, (chunk) =>
      this.sql.all<AttemptColumns>(Prisma.sql`
        SELECT ${ATTEMPT_COLUMNS} FROM "webhook_attempts" a
        WHERE a."delivery_id" IN (${Prisma.join(chunk)})
        ORDER BY a."attempted_at", a."id"`),
    );
    for (const row of rows) byDelivery.get(row.delivery_id)?.push(toAttempt(row));
    return byDelivery;
  }

  async requeueDelivery(id: string, at: Date): Promise<WebhookDelivery | null> {
    // The lease is dropped too: a request still in flight then records its attempt without overriding the
    // re-send, which goes out on its own. A re-send goes out at once, outside its reference's order (and holds
    // nothing back): its ordering key is cleared.
    const [row] = await this.sql.all<DeliveryColumns>(Prisma.sql`
      UPDATE "webhook_deliveries" SET "status" = 'pending', "attempt_count" = 0, "next_attempt_at" = ${at},
        "lease_owner" = NULL, "lease_expires_at" = NULL, "updated_at" = ${at}, "ordering_key" = NULL
      WHERE "id" = ${id}
      RETURNING ${DELIVERY_COLUMNS}`);
    return row ? toDeliveryFromColumns(row) : null;
  }

  deleteSucceededDeliveriesBefore(cutoff: Date, batchSize: number): Promise<number> {
    // One bounded batch on both databases (neither SQLite nor PostgreSQL has DELETE ... LIMIT by default), found
    // through the (status, updated_at) index; a delivery re-sent meanwhile is no longer "succeeded" and stays.
    // Attempts go with their delivery (ON DELETE CASCADE).
    return this.sql.run(Prisma.sql`
      DELETE FROM "webhook_deliveries" WHERE "status" = 'succeeded' AND "id" IN (
        SELECT "id" FROM "webhook_deliveries" WHERE "status" = 'succeeded' AND "updated_at" < ${cutoff}
        LIMIT ${batchSize})`);
  }

  async countPendingDeliveries(): Promise<number> {
    const [row] = await this.sql.all<{ n: number | bigint }>(Prisma.sql`
      SELECT COUNT(*) AS "n" FROM "webhook_deliveries" WHERE "status" = 'pending'`);
    return Number(row?.n ?? 0);
  }

  /**
   * One statement on both databases: pick the due, unleased deliveries in due order, rank them within their
   * endpoint, lease those within the endpoint's limit, and return them whole. On PostgreSQL `FOR UPDATE SKIP
   * LOCKED` makes concurrent instances pass over each other's rows instead of waiting for them or taking them too;
   * a row leased by another instance that committed first no longer matches (its lease is in the future). SQLite
   * has one writer at a time, so the statement alone is atomic there. The window looked at is twice the limit, so
   * that one endpoint's long backlog at the head of the queue cannot fill a claim meant for several endpoints.
   * An ordered delivery is a candidate only while no earlier delivery of its (endpoint, ordering key) is pending
   * (`pendingPredecessorIsAbsent`): so one reference's deliveries are leased one at a time, in log order, by
   * whichever instance claims, and a retry waiting holds back only its own reference.
   */
  async claimDueDeliveries(request: ClaimRequest): Promise<WebhookDelivery[]> {
    const { owner, now, leaseExpiresAt, limit } = request;
    const limits = [...request.perEndpointLimit];
    const excluded = limits.filter(([, max]) => max <= 0).map(([id]) => id);
    const limited = limits.filter(([, max]) => max > 0);
    const exclusion =
      excluded.length > 0 ? Prisma.sql`AND d."endpoint_id" NOT IN (${Prisma.join(excluded)})` : Prisma.empty;
    const defaultLimit = Prisma.sql`CAST(${request.defaultPerEndpointLimit} AS INTEGER)`;
    const perEndpoint =
      limited.length > 0
        ? Prisma.sql`CASE ranked."endpoint_id" ${Prisma.join(
            limited.map(([id, max]) => Prisma.sql`WHEN ${id} THEN CAST(${max} AS INTEGER)`),
            " ",
          )} ELSE ${defaultLimit} END`
        : defaultLimit;
    const lock = this.provider === "postgres" ? Prisma.sql`FOR UPDATE OF d SKIP LOCKED` : Prisma.empty;
    const rows = await this.sql.all<DeliveryColumns>(Prisma.sql`
      WITH candidates AS (
        SELECT d."id", d."endpoint_id", d."next_attempt_at" FROM "webhook_deliveries" d
        WHERE d."status" = 'pending' AND d."next_attempt_at" <= ${now}
          AND (d."lease_expires_at" IS NULL OR d."lease_expires_at" < ${now}) ${exclusion}
          AND ${pendingPredecessorIsAbsent("d")}
        ORDER BY d."next_attempt_at", d."id"
        LIMIT ${limit * 2}
        ${lock}
      ), ranked AS (
        SELECT "id", "endpoint_id", "next_attempt_at",
               ROW_NUMBER() OVER (PARTITION BY "endpoint_id" ORDER BY "next_attempt_at", "id") AS "rank_in_endpoint"
        FROM candidates
      )
      UPDATE "webhook_deliveries" SET "lease_owner" = ${owner}, "lease_expires_at" = ${leaseExpiresAt}
      WHERE "id" IN (
        SELECT ranked."id" FROM ranked WHERE ranked."rank_in_endpoint" <= ${perEndpoint}
        ORDER BY ranked."next_attempt_at", ranked."id" LIMIT ${limit}
      )
      RETURNING ${DELIVERY_COLUMNS}`);
    return rows
      .map(toDeliveryFromColumns)
      .sort((a, b) => (a.nextAttemptAt?.getTime() ?? 0) - (b.nextAttemptAt?.getTime() ?? 0) || (a.id < b.id ? -1 : 1));
  }

  async finishAttempts(items: readonly FinishedAttempt[], owner: string): Promise<Set<string>> {
    if (items.length === 0) return new Set();
    const ids = items.map((item) => item.attempt.deliveryId);
    const caseOf = (value: (item: FinishedAttempt) => Prisma.Sql) =>
      Prisma.sql`CASE "id" ${Prisma.join(
        items.map((item) => Prisma.sql`WHEN ${item.attempt.deliveryId} THEN ${value(item)}`),
        " ",
      )} END`;
    // One statement for the whole batch: each delivery's new state is picked by its id.
    const updated = await this.sql.run(Prisma.sql`
      UPDATE "webhook_deliveries" SET
        "status" = ${caseOf((item) => Prisma.sql`${item.transition.status}`)},
        "attempt_count" = ${caseOf((item) => Prisma.sql`CAST(${item.transition.attemptCount} AS INTEGER)`)},
        "next_attempt_at" = ${caseOf((item) => this.timestamp(item.transition.nextAttemptAt))},
        "updated_at" = ${caseOf((item) => this.timestamp(item.transition.at))},
        "lease_owner" = NULL, "lease_expires_at" = NULL
      WHERE "id" IN (${Prisma.join(ids)}) AND "lease_owner" = ${owner}`);
    let existing = new Set(ids);
    if (updated < items.length) {
      // Some lease was lost, or a delivery was deleted with its endpoint: an attempt of a deleted delivery
      // cannot be stored (its foreign key would fail), the others still are.
      const rows = await this.sql.all<{ id: string }>(Prisma.sql`
        SELECT "id" FROM "webhook_deliveries" WHERE "id" IN (${Prisma.join(ids)})`);
      existing = new Set(rows.map((row) => row.id));
    }
    const kept = items.filter((item) => existing.has(item.attempt.deliveryId)).map((item) => item.attempt);
    if (kept.length > 0) {
      await this.sql.run(Prisma.sql`
        INSERT INTO "webhook_attempts"
          ("id", "delivery_id", "attempted_at", "status_code", "error", "latency_ms", "response_body")
        VALUES ${Prisma.join(
          kept.map(
            (attempt) =>
              Prisma.sql`(${attempt.id}, ${attempt.deliveryId}, ${attempt.attemptedAt}, ${attempt.statusCode},
                ${attempt.error}, ${attempt.latencyMs}, ${attempt.responseBody})`,
          ),
        )}
        ON CONFLICT ("id") DO UPDATE SET "attempted_at" = excluded."attempted_at",
          "status_code" = excluded."status_code", "error" = excluded."error", "latency_ms" = excluded."latency_ms",
          "response_body" = excluded."response_body"`);
    }
    return existing;
  }

  /** A date parameter inside an expression whose type PostgreSQL cannot infer from a column (a CASE branch). */
  private timestamp(value: Date | null): Prisma.Sql {
    if (this.provider === "postgres") return Prisma.sql`CAST(${value} AS TIMESTAMP(3))`;
    return Prisma.sql`${value}`;
  }

  async abandonDelivery(id: string, owner: string, at: Date): Promise<void> {
    await this.sql.run(Prisma.sql`
      UPDATE "webhook_deliveries" SET "status" = 'failed', "next_attempt_at" = NULL, "lease_owner" = NULL,
        "lease_expires_at" = NULL, "updated_at" = ${at}
      WHERE "id" = ${id} AND "lease_owner" = ${owner}`);
  }

  async failPendingDeliveries(endpointIds: string | readonly string[], at: Date): Promise<number> {
    const ids = typeof endpointIds === "string" ? [endpointIds] : [...endpointIds];
    if (ids.length === 0) return 0;
    const counts = await findInChunks(ids, async (chunk) => [
      await this.sql.run(Prisma.sql`
        UPDATE "webhook_deliveries" SET "status" = 'failed', "next_attempt_at" = NULL, "lease_owner" = NULL,
          "lease_expires_at" = NULL, "updated_at" = ${at}
        WHERE "endpoint_id" IN (${Prisma.join(chunk)}) AND "status" = 'pending'
          AND ("lease_expires_at" IS NULL OR "lease_expires_at" < ${at})`),
    ]);
    return counts.reduce((sum, count) => sum + count, 0);
  }

  async releaseDeliveries(ids: readonly string[], owner: string): Promise<void> {
    if (ids.length === 0) return;
    await findInChunks(ids, async (chunk) => {
      await this.sql.run(Prisma.sql`
        UPDATE "webhook_deliveries" SET "lease_owner" = NULL, "lease_expires_at" = NULL
        WHERE "id" IN (${Prisma.join(chunk)}) AND "lease_owner" = ${owner}`);
      return [];
    });
  }

  async markEndpointsFailing(since: ReadonlyMap<string, Date>): Promise<void> {
    if (since.size === 0) return;
    const entries = [...since];
    await this.sql.run(Prisma.sql`
      UPDATE "webhook_endpoints" SET "failing_since" = CASE "id" ${Prisma.join(
        entries.map(([id, at]) => Prisma.sql`WHEN ${id} THEN ${this.timestamp(at)}`),
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
    const rows = await this.sql.all<{ id: string }>(Prisma.sql`
      UPDATE "webhook_endpoints" SET "enabled" = ${false}, "disabled_reason" = ${reason}, "updated_at" = ${at}
      WHERE "id" IN (${Prisma.join([...ids])}) AND "enabled" = ${true} ${streak}
      RETURNING "id"`);
    return rows.map((row) => row.id);
  }

  /** The columns that differ from the domain's endpoint: encrypted secrets, the event types as JSON, the filter flag. */
  private storedColumns(endpoint: WebhookEndpoint) {
    const previous: StoredPreviousSecret[] = endpoint.previousSecrets.map((item) => ({
      secret: item.secret,
      expires_at: item.expiresAt.toISOString(),
    }));
    const eventTypes = endpoint.eventTypes === null ? null : JSON.stringify(endpoint.eventTypes);
    return {
      secret: this.secrets.encrypt(endpoint.secret),
      // One envelope for the whole list: the row stays one row however many rotations happened in 24 hours.
      previousSecrets: previous.length === 0 ? null : this.secrets.encrypt(JSON.stringify(previous)),
      // null is SQL NULL (every event type), not the JSON value null.
      eventTypes: this.provider === "postgres" ? Prisma.sql`CAST(${eventTypes} AS JSONB)` : Prisma.sql`${eventTypes}`,
      tagFiltered: endpoint.tagIds !== null,
    };
  }

  private toEndpoint(row: EndpointColumns, tagIds: string[]): WebhookEndpoint {
    return {
      id: row.id,
      organizationId: row.organization_id,
      url: row.url,
      eventTypes: (fromJson(row.event_types) as LifecycleEventType[] | null) ?? null,
      tagIds: toBoolean(row.tag_filtered) ? tagIds : null,
      description: row.description,
      enabled: toBoolean(row.enabled),
      disabledReason: row.disabled_reason,
      secret: this.secrets.decrypt(row.secret),
      previousSecrets: this.readPreviousSecrets(row),
      previousSecretExpiresAt: toNullableDate(row.previous_secret_expires_at),
      failingSince: toNullableDate(row.failing_since),
      ordering: row.ordering as WebhookOrdering,
      createdAt: toDate(row.created_at),
      updatedAt: toDate(row.updated_at),
    };
  }

  private readPreviousSecrets(row: EndpointColumns): PreviousSecret[] {
    if (row.previous_secret === null) return [];
    // Before encryption the column held the one previous secret in plain text, valid until the expiry column.
    if (!isEncrypted(row.previous_secret)) {
      const expiresAt = toNullableDate(row.previous_secret_expires_at);
      return expiresAt ? [{ secret: row.previous_secret, expiresAt }] : [];
    }
    const stored = JSON.parse(this.secrets.decrypt(row.previous_secret)) as StoredPreviousSecret[];
    return stored.map((item) => ({ secret: item.secret, expiresAt: new Date(item.expires_at) }));
  }
}
