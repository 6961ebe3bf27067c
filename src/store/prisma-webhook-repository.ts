import { findInChunks } from "./sql/in-chunks.ts";
import type { LifecycleEventType } from "../domain/lifecycle/lifecycle-event.ts";
import type {
  DeliveryStatus,
  EndpointRoute,
  PreviousSecret,
  WebhookOrdering,
  WebhookAttempt,
  WebhookDelivery,
  WebhookEndpoint,
} from "../domain/webhooks/webhook-models.ts";
import type {
  ClaimRequest,
  DeliveryListQuery,
  FinishedAttempt,
  WebhookRepository,
} from "../domain/webhooks/webhook-repository.ts";
import type { Database, PrismaClient, PrismaTransaction } from "./database.ts";
import { chunksOf, fromJson, toBoolean, toDate, toNullableDate } from "./sql/rows.ts";
import { isEncrypted, type SecretCipher } from "./secret-cipher.ts";
import type { SqlExecutor } from "./sql/executor.ts";
import { Prisma } from "./__generated__/sqlite/client.ts";
import { DELIVERY_COLUMNS, toDeliveryFromColumns, type DeliveryColumns } from "./sql/webhook-delivery-rows.ts";
import { pendingPredecessorIsAbsent } from "./sql/webhook-ordering-queries.ts";

/*
 * The webhook tables. Methods that change several rows expect to run inside the caller's transaction
 * (`store.transaction(...)`, whose store hands out a PrismaWebhookRepository on the transaction's executor).
 * Raw statements run on `this.sql` (src/store/sql/executor.ts); the model API calls still here run in the unit
 * of work too (the driver runs them on its connection).
 */

type Client = PrismaClient | PrismaTransaction;

type EndpointRow = Awaited<ReturnType<PrismaClient["webhookEndpoint"]["findUniqueOrThrow"]>> & {
  readonly tags: readonly { readonly tagId: string }[];
};
type DeliveryRow = Awaited<ReturnType<PrismaClient["webhookDelivery"]["findUniqueOrThrow"]>>;

/** An endpoint as a raw statement reads it (column names; the driver's types, see src/store/rows.ts). */
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

/** The row Prisma would read for these columns, its tags still to be added. */
function toEndpointRow(row: EndpointColumns): EndpointRow {
  return {
    id: row.id,
    organizationId: row.organization_id,
    url: row.url,
    eventTypes: fromJson(row.event_types) as EndpointRow["eventTypes"],
    description: row.description,
    enabled: toBoolean(row.enabled),
    disabledReason: row.disabled_reason,
    secret: row.secret,
    previousSecrets: row.previous_secret,
    previousSecretExpiresAt: toNullableDate(row.previous_secret_expires_at),
    failingSince: toNullableDate(row.failing_since),
    tagFiltered: toBoolean(row.tag_filtered),
    ordering: row.ordering,
    createdAt: toDate(row.created_at),
    updatedAt: toDate(row.updated_at),
    tags: [],
  };
}

/** The stored list of secrets rotated out, as written by `endpointData`. */
interface StoredPreviousSecret {
  readonly secret: string;
  readonly expires_at: string;
}

/** Every endpoint read brings its tag filter along (one more statement per read, never one per endpoint). */
const WITH_TAGS = { tags: { select: { tagId: true }, orderBy: { tagId: "asc" } } } as const;

function toDelivery(row: DeliveryRow): WebhookDelivery {
  return { ...row, status: row.status as DeliveryStatus };
}

export class PrismaWebhookRepository implements WebhookRepository {
  constructor(
    private readonly database: Database,
    private readonly client: Client,
    /** Encrypts signing secrets on the way in, decrypts them on the way out: the domain sees plain secrets. */
    private readonly secrets: SecretCipher,
    /** Runs statements on the driver: in the unit of work's transaction when the store has one. */
    private readonly sql: SqlExecutor = database.sql,
  ) {}

  /**
   * Encrypts the secrets of endpoints stored before encryption existed (plain `whsec_` values), at start-up.
   * Each row is rewritten only if it still holds what was read, so a concurrent rotation on another instance is
   * never overwritten. Returns how many endpoints were rewritten.
   */
  async encryptPlaintextSecrets(): Promise<number> {
    const rows = await this.client.webhookEndpoint.findMany({
      where: {
        OR: [
          { NOT: { secret: { startsWith: "v1:" } } },
          { AND: [{ previousSecrets: { not: null } }, { NOT: { previousSecrets: { startsWith: "v1:" } } }] },
        ],
      },
      include: WITH_TAGS,
    });
    let rewritten = 0;
    for (const row of rows) {
      const { secret, previousSecrets } = this.endpointData(this.toEndpoint(row));
      const { count } = await this.client.webhookEndpoint.updateMany({
        where: { id: row.id, secret: row.secret, previousSecrets: row.previousSecrets },
        data: { secret, previousSecrets },
      });
      rewritten += count;
    }
    return rewritten;
  }

  async insertEndpoint(endpoint: WebhookEndpoint): Promise<void> {
    await this.client.webhookEndpoint.create({ data: this.endpointData(endpoint) });
  }

  async findEndpoint(organizationId: string, id: string): Promise<WebhookEndpoint | null> {
    const row = await this.client.webhookEndpoint.findFirst({ where: { id, organizationId }, include: WITH_TAGS });
    return row && this.toEndpoint(row);
  }

  async lockEndpoint(organizationId: string, id: string): Promise<WebhookEndpoint | null> {
    // SQLite runs one write transaction at a time: nothing to lock. On PostgreSQL, the lock an UPDATE of non-key
    // columns takes, before the read (which also brings the tag filter along).
    if (this.database.provider === "postgres") {
      await this.sql.all(Prisma.sql`
        SELECT 1 FROM "webhook_endpoints" WHERE "id" = ${id} AND "organization_id" = ${organizationId}
        FOR NO KEY UPDATE`);
    }
    return this.findEndpoint(organizationId, id);
  }

  async findEndpointsByIds(ids: readonly string[]): Promise<WebhookEndpoint[]> {
    if (ids.length === 0) return [];
    // One raw statement (the worker reads its endpoints after every claim): the endpoints with their tag ids,
    // one row per (endpoint, tag), folded into Prisma's row shape so that one mapping reads both paths.
    const rows = await findInChunks(ids, (chunk) =>
      this.sql.all<EndpointColumns & { tag_id: string | null }>(Prisma.sql`
        SELECT e."id", e."organization_id", e."url", e."event_types", e."description", e."enabled",
               e."disabled_reason", e."secret", e."previous_secret", e."previous_secret_expires_at",
               e."failing_since", e."tag_filtered", e."ordering", e."created_at", e."updated_at", et."tag_id"
        FROM "webhook_endpoints" e LEFT JOIN "webhook_endpoint_tags" et ON et."endpoint_id" = e."id"
        WHERE e."id" IN (${Prisma.join(chunk)})
        ORDER BY e."id", et."tag_id"`),
    );
    const endpoints = new Map<string, EndpointRow>();
    for (const row of rows) {
      let endpoint = endpoints.get(row.id);
      if (!endpoint) endpoints.set(row.id, (endpoint = toEndpointRow(row)));
      if (row.tag_id !== null) (endpoint.tags as { tagId: string }[]).push({ tagId: row.tag_id });
    }
    return [...endpoints.values()].map((row) => this.toEndpoint(row));
  }

  async replaceEndpointTags(organizationId: string, endpointId: string, tagIds: readonly string[]): Promise<string[]> {
    await this.client.webhookEndpointTag.deleteMany({ where: { endpointId } });
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

  countEndpoints(organizationId: string): Promise<number> {
    return this.client.webhookEndpoint.count({ where: { organizationId } });
  }

  async listEndpoints(organizationId: string, beforeId: string | undefined, limit: number): Promise<WebhookEndpoint[]> {
    const rows = await this.client.webhookEndpoint.findMany({
      where: { organizationId, ...(beforeId ? { id: { lt: beforeId } } : {}) },
      orderBy: { id: "desc" },
      take: limit,
      include: WITH_TAGS,
    });
    return rows.map((row) => this.toEndpoint(row));
  }

  async updateEndpoint(endpoint: WebhookEndpoint): Promise<void> {
    const { id, organizationId, createdAt, ...changes } = this.endpointData(endpoint);
    await this.client.webhookEndpoint.updateMany({ where: { id, organizationId }, data: changes });
  }

  async deleteEndpoint(organizationId: string, id: string): Promise<boolean> {
    const endpoint = await this.client.webhookEndpoint.findFirst({
      where: { id, organizationId },
      select: { id: true },
    });
    if (!endpoint) return false;
    // Attempts go with their deliveries (ON DELETE CASCADE); deliveries have no foreign key to the endpoint.
    await this.client.webhookDelivery.deleteMany({ where: { endpointId: id } });
    await this.client.webhookEndpoint.delete({ where: { id } });
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
    const row = await this.client.webhookDelivery.findFirst({ where: { id, organizationId } });
    return row && toDelivery(row);
  }

  async findDeliveriesByIds(organizationId: string, ids: readonly string[]): Promise<WebhookDelivery[]> {
    if (ids.length === 0) return [];
    const rows = await this.client.webhookDelivery.findMany({ where: { organizationId, id: { in: [...ids] } } });
    return rows.map(toDelivery);
  }

  async findAttemptsByIds(organizationId: string, ids: readonly string[]): Promise<WebhookAttempt[]> {
    if (ids.length === 0) return [];
    return this.client.webhookAttempt.findMany({ where: { id: { in: [...ids] }, delivery: { organizationId } } });
  }

  async listDeliveries(query: DeliveryListQuery): Promise<WebhookDelivery[]> {
    const rows = await this.client.webhookDelivery.findMany({
      where: {
        endpointId: query.endpointId,
        ...(query.status ? { status: query.status } : {}),
        ...(query.beforeId ? { id: { lt: query.beforeId } } : {}),
      },
      orderBy: { id: "desc" },
      take: query.limit,
    });
    return rows.map(toDelivery);
  }

  async findAttemptsByDeliveryIds(deliveryIds: readonly string[]): Promise<Map<string, WebhookAttempt[]>> {
    const byDelivery = new Map<string, WebhookAttempt[]>(deliveryIds.map((id) => [id, []]));
    if (deliveryIds.length === 0) return byDelivery;
    const rows = await findInChunks(deliveryIds, (chunk) =>
      this.client.webhookAttempt.findMany({
        where: { deliveryId: { in: chunk } },
        orderBy: [{ attemptedAt: "asc" }, { id: "asc" }],
      }),
    );
    for (const row of rows) byDelivery.get(row.deliveryId)?.push(row);
    return byDelivery;
  }

  async requeueDelivery(id: string, at: Date): Promise<WebhookDelivery | null> {
    // The lease is dropped too: a request still in flight then records its attempt without overriding the
    // re-send, which goes out on its own.
    const { count } = await this.client.webhookDelivery.updateMany({
      where: { id },
      data: {
        status: "pending",
        nextAttemptAt: at,
        leaseOwner: null,
        leaseExpiresAt: null,
        updatedAt: at,
        // A re-send goes out at once, outside its reference's order (and holds nothing back).
        orderingKey: null,
      },
    });
    if (count === 0) return null;
    const row = await this.client.webhookDelivery.findUnique({ where: { id } });
    return row && toDelivery(row);
  }

  async deleteSucceededDeliveriesBefore(cutoff: Date, batchSize: number): Promise<number> {
    // Ids first, then one delete: a bounded batch on both databases (neither SQLite nor PostgreSQL has
    // DELETE ... LIMIT by default). Attempts go with their delivery (ON DELETE CASCADE).
    const batch = await this.client.webhookDelivery.findMany({
      where: { status: "succeeded", updatedAt: { lt: cutoff } },
      select: { id: true },
      take: batchSize,
    });
    if (batch.length === 0) return 0;
    const { count } = await this.client.webhookDelivery.deleteMany({
      where: { id: { in: batch.map((row) => row.id) }, status: "succeeded" },
    });
    return count;
  }

  countPendingDeliveries(): Promise<number> {
    return this.client.webhookDelivery.count({ where: { status: "pending" } });
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
    const lock = this.database.provider === "postgres" ? Prisma.sql`FOR UPDATE OF d SKIP LOCKED` : Prisma.empty;
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
    if (this.database.provider === "postgres") return Prisma.sql`CAST(${value} AS TIMESTAMP(3))`;
    return Prisma.sql`${value}`;
  }

  async abandonDelivery(id: string, owner: string, at: Date): Promise<void> {
    await this.client.webhookDelivery.updateMany({
      where: { id, leaseOwner: owner },
      data: { status: "failed", nextAttemptAt: null, leaseOwner: null, leaseExpiresAt: null, updatedAt: at },
    });
  }

  async failPendingDeliveries(endpointIds: string | readonly string[], at: Date): Promise<number> {
    const ids = typeof endpointIds === "string" ? [endpointIds] : [...endpointIds];
    if (ids.length === 0) return 0;
    const { count } = await this.client.webhookDelivery.updateMany({
      where: {
        endpointId: { in: ids },
        status: "pending",
        OR: [{ leaseExpiresAt: null }, { leaseExpiresAt: { lt: at } }],
      },
      data: { status: "failed", nextAttemptAt: null, leaseOwner: null, leaseExpiresAt: null, updatedAt: at },
    });
    return count;
  }

  async releaseDeliveries(ids: readonly string[], owner: string): Promise<void> {
    await this.client.webhookDelivery.updateMany({
      where: { id: { in: [...ids] }, leaseOwner: owner },
      data: { leaseOwner: null, leaseExpiresAt: null },
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

  private endpointData(endpoint: WebhookEndpoint) {
    const { tagIds, ...columns } = endpoint;
    const previous: StoredPreviousSecret[] = endpoint.previousSecrets.map((item) => ({
      secret: item.secret,
      expires_at: item.expiresAt.toISOString(),
    }));
    return {
      ...columns,
      secret: this.secrets.encrypt(endpoint.secret),
      // One envelope for the whole list: the row stays one row however many rotations happened in 24 hours.
      previousSecrets: previous.length === 0 ? null : this.secrets.encrypt(JSON.stringify(previous)),
      eventTypes: endpoint.eventTypes === null ? Prisma.DbNull : [...endpoint.eventTypes],
      tagFiltered: tagIds !== null,
    };
  }

  private toEndpoint(row: EndpointRow): WebhookEndpoint {
    const { tags, tagFiltered, ...endpoint } = row;
    return {
      ...endpoint,
      secret: this.secrets.decrypt(row.secret),
      previousSecrets: this.readPreviousSecrets(row),
      eventTypes: (row.eventTypes as LifecycleEventType[] | null) ?? null,
      ordering: row.ordering as WebhookOrdering,
      tagIds: tagFiltered ? tags.map((tag) => tag.tagId) : null,
    };
  }

  private readPreviousSecrets(row: EndpointRow): PreviousSecret[] {
    if (row.previousSecrets === null) return [];
    // Before encryption the column held the one previous secret in plain text, valid until the expiry column.
    if (!isEncrypted(row.previousSecrets)) {
      const expiresAt = row.previousSecretExpiresAt;
      return expiresAt ? [{ secret: row.previousSecrets, expiresAt }] : [];
    }
    const stored = JSON.parse(this.secrets.decrypt(row.previousSecrets)) as StoredPreviousSecret[];
    return stored.map((item) => ({ secret: item.secret, expiresAt: new Date(item.expires_at) }));
  }
}
