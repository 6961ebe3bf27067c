import { throttleWindowOf, type WebhookDelivery } from "../../domain/webhooks/webhook-models.ts";
import type {
  ClaimRequest,
  CountedLostAttempts,
  DeliveryLease,
  DeliveryTransition,
  FinishedAttempt,
} from "../../domain/webhooks/webhook-repository.ts";
import type { DatabaseProvider } from "../database.ts";
import type { SqlExecutor } from "./executor.ts";
import { findInChunks } from "./in-chunks.ts";
import { timestampParameter } from "./rows.ts";
import { DELIVERY_COLUMNS, toDeliveryFromColumns, type DeliveryColumns } from "./webhook-delivery-rows.ts";
import { Prisma } from "./sql-template.ts";

/*
 * The delivery worker's side of "webhook_deliveries": leasing due deliveries (the claim), recording their
 * attempts, and ending or giving back leases. Part of the webhook repository (src/store/sql/webhook-repository.ts);
 * every statement runs on the executor it is given. A lease is matched by the token of the claim that took it
 * (`lease_owner`), never by the instance alone: a late outcome of an older claim must not settle a newer one.
 */

/** A delivery's move to its transition, under its claim's lease. */
interface DeliveryMove extends DeliveryLease {
  readonly transition: DeliveryTransition;
  readonly keepsLease: boolean;
}

/** `CASE "id" WHEN <id> THEN <value> … END`: one value per delivery, in one statement. */
function caseById<T extends DeliveryLease>(items: readonly T[], value: (item: T) => Prisma.Sql): Prisma.Sql {
  return Prisma.sql`CASE "id" ${Prisma.join(
    items.map((item) => Prisma.sql`WHEN ${item.deliveryId} THEN ${value(item)}`),
    " ",
  )} END`;
}

/** Rows among `leases` still held by their claims. */
function heldBy(leases: readonly DeliveryLease[]): Prisma.Sql {
  return Prisma.sql`"id" IN (${Prisma.join(leases.map((lease) => lease.deliveryId))})
    AND "lease_owner" = ${caseById(leases, (lease) => Prisma.sql`${lease.leaseToken}`)}`;
}

export class SqlWebhookClaimRepository {
  constructor(
    private readonly provider: DatabaseProvider,
    /** Runs every statement: the driver, or the transaction of the unit of work that built this repository. */
    private readonly sql: SqlExecutor,
  ) {}

  /**
   * One statement on both databases (docs/decisions.md, "Webhook claims: heads only, fair shares"):
   *
   * - Candidates are read per endpoint: each endpoint's oldest due, unleased deliveries, at most its limit, from the
   *   partial index "webhook_deliveries_due_heads_idx" (a LATERAL subquery on PostgreSQL, a correlated `IN` on
   *   SQLite, which has no LATERAL). So a claim reads a few rows per endpoint with work, whatever the backlogs.
   * - Only heads are in that index: an ordered delivery behind an earlier pending one of its reference is `held`
   *   (kept by triggers, migration 0014), so one reference's deliveries are leased one at a time, in log order, by
   *   whichever instance claims, and a backlog held behind a failing reference is never read.
   * - The candidates are leased round-robin: first organization by organization, then within an organization
   *   endpoint by endpoint (each round takes every organization's next delivery, oldest due first). A small
   *   organization's delivery is in the first round of the next claim, however long a big one's backlog is.
   *
   * On PostgreSQL `FOR UPDATE SKIP LOCKED` makes concurrent instances pass over each other's rows instead of
   * waiting for them or taking them too; a row leased by another instance that committed first no longer matches
   * (its lease is in the future). SQLite has one writer at a time, so the statement alone is atomic there.
   */
  async claimDueDeliveries(request: ClaimRequest): Promise<WebhookDelivery[]> {
    const { owner, now, leaseExpiresAt, limit } = request;
    const limits = [...request.perEndpointLimit];
    const excluded = limits.filter(([, max]) => max <= 0).map(([id]) => id);
    const limited = limits.filter(([, max]) => max > 0);
    const exclusion = excluded.length > 0 ? Prisma.sql`WHERE e."id" NOT IN (${Prisma.join(excluded)})` : Prisma.empty;
    const defaultLimit = Prisma.sql`CAST(${request.defaultPerEndpointLimit} AS INTEGER)`;
    const perEndpoint =
      limited.length > 0
        ? Prisma.sql`CASE c."endpoint_id" ${Prisma.join(
            limited.map(([id, max]) => Prisma.sql`WHEN ${id} THEN CAST(${max} AS INTEGER)`),
            " ",
          )} ELSE ${defaultLimit} END`
        : defaultLimit;
    // Read per endpoint: the most any endpoint may get (the per-endpoint limits are applied to the ranks below).
    const readPerEndpoint = Math.min(
      limit,
      Math.max(request.defaultPerEndpointLimit, ...limited.map(([, max]) => max)),
    );
    const dueHeads = (endpoint: Prisma.Sql) => Prisma.sql`
      x."endpoint_id" = ${endpoint} AND x."status" = 'pending' AND NOT x."held" AND x."next_attempt_at" <= ${now}
        AND (x."lease_expires_at" IS NULL OR x."lease_expires_at" < ${now})
      ORDER BY x."next_attempt_at", x."id" LIMIT ${readPerEndpoint}`;
    // The throttle (docs/decisions.md, "Webhook throttle"): a throttled endpoint may get what is left of its
    // maximum in the current second, as its window row says ("allowance"; NULL for an unthrottled endpoint,
    // whose claim reads no window). The leased deliveries are counted in the same row before the claim commits.
    const second = throttleWindowOf(now);
    const windowSecond = Prisma.sql`CAST(${second} AS BIGINT)`;
    const leftInWindow = (greatest: string) => Prisma.sql`CASE WHEN w."window_second" = ${windowSecond}
      THEN ${Prisma.raw(greatest)}(e."max_deliveries_per_second" - w."used", 0) ELSE e."max_deliveries_per_second" END`;
    const candidates =
      this.provider === "postgres"
        ? // The window row is locked, SKIP LOCKED: while another instance's claim counts in it, this claim leases
          // nothing for that endpoint (NULL allowance of a throttled endpoint) instead of waiting; once that claim
          // has committed, the lock reads its count.
          Prisma.sql`
          SELECT d."id", d."endpoint_id", e."organization_id", d."next_attempt_at", t."allowance"
          FROM "webhook_endpoints" e LEFT JOIN LATERAL (
            SELECT ${leftInWindow("GREATEST")} AS "allowance" FROM "webhook_endpoint_throttles" w
            WHERE w."endpoint_id" = e."id" AND e."max_deliveries_per_second" IS NOT NULL
            FOR UPDATE SKIP LOCKED
          ) t ON TRUE CROSS JOIN LATERAL (
            SELECT x."id", x."endpoint_id", x."next_attempt_at" FROM "webhook_deliveries" x
            WHERE (e."max_deliveries_per_second" IS NULL OR t."allowance" > 0) AND ${dueHeads(Prisma.sql`e."id"`)}
            FOR UPDATE SKIP LOCKED
          ) d ${exclusion}`
        : Prisma.sql`
          SELECT d."id", d."endpoint_id", e."organization_id", d."next_attempt_at",
            CASE WHEN e."max_deliveries_per_second" IS NULL THEN NULL ELSE COALESCE((
              SELECT ${leftInWindow("MAX")} FROM "webhook_endpoint_throttles" w WHERE w."endpoint_id" = e."id"), 0)
            END AS "allowance"
          FROM "webhook_endpoints" e JOIN "webhook_deliveries" d ON d."id" IN (
            SELECT x."id" FROM "webhook_deliveries" x WHERE ${dueHeads(Prisma.sql`e."id"`)}
          ) ${exclusion}`;
    const chosen = Prisma.sql`
      WITH candidates AS (${candidates}), by_endpoint AS (
        SELECT c.*, ROW_NUMBER() OVER (PARTITION BY c."endpoint_id" ORDER BY c."next_attempt_at", c."id") AS "rank"
        FROM candidates c
      ), by_organization AS (
        SELECT c."id", c."next_attempt_at", ROW_NUMBER() OVER (
          PARTITION BY c."organization_id" ORDER BY c."rank", c."next_attempt_at", c."id") AS "round"
        FROM by_endpoint c WHERE c."rank" <= ${perEndpoint} AND (c."allowance" IS NULL OR c."rank" <= c."allowance")
      )`;
    const lease = Prisma.sql`
      UPDATE "webhook_deliveries" SET "lease_owner" = ${owner}, "lease_expires_at" = ${leaseExpiresAt}
      WHERE "id" IN (
        SELECT c."id" FROM by_organization c ORDER BY c."round", c."next_attempt_at", c."id" LIMIT ${limit}
      )`;
    let rows: DeliveryColumns[];
    if (this.provider === "postgres") {
      rows = await this.sql.all<DeliveryColumns>(Prisma.sql`
        ${chosen}, leased AS (${lease} RETURNING ${DELIVERY_COLUMNS}), counted AS (
          UPDATE "webhook_endpoint_throttles" w SET "window_second" = ${windowSecond},
            "used" = CASE WHEN w."window_second" = ${windowSecond} THEN w."used" ELSE 0 END + l."n"
          FROM (SELECT "endpoint_id", COUNT(*) AS "n" FROM leased GROUP BY "endpoint_id") l
          WHERE w."endpoint_id" = l."endpoint_id"
        )
        SELECT * FROM leased`);
    } else {
      // SQLite has one writer, and its statements change one table: the window is counted by a second statement,
      // only when the claim leased deliveries of a throttled endpoint (its rows say so).
      const leased = await this.sql.all<DeliveryColumns & { throttled: number | null }>(Prisma.sql`
        ${chosen} ${lease}
        RETURNING ${DELIVERY_COLUMNS}, (SELECT 1 FROM "webhook_endpoint_throttles" w
          WHERE w."endpoint_id" = "webhook_deliveries"."endpoint_id") AS "throttled"`);
      const counts = new Map<string, number>();
      for (const row of leased)
        if (row.throttled !== null) counts.set(row.endpoint_id, (counts.get(row.endpoint_id) ?? 0) + 1);
      if (counts.size > 0) await this.countInWindow(second, counts);
      rows = leased;
    }
    return rows
      .map(toDeliveryFromColumns)
      .sort((a, b) => (a.nextAttemptAt?.getTime() ?? 0) - (b.nextAttemptAt?.getTime() ?? 0) || (a.id < b.id ? -1 : 1));
  }

  /** Adds leased deliveries to their endpoints' windows of `second` (SQLite; PostgreSQL counts in the claim). */
  private async countInWindow(second: number, counts: ReadonlyMap<string, number>): Promise<void> {
    const entries = [...counts];
    await this.sql.run(Prisma.sql`
      UPDATE "webhook_endpoint_throttles" SET
        "used" = CASE WHEN "window_second" = ${second} THEN "used" ELSE 0 END + CASE "endpoint_id" ${Prisma.join(
          entries.map(([id, n]) => Prisma.sql`WHEN ${id} THEN ${n}`),
          " ",
        )} END,
        "window_second" = ${second}
      WHERE "endpoint_id" IN (${Prisma.join(entries.map(([id]) => id))})`);
  }

  async finishAttempts(items: readonly FinishedAttempt[]): Promise<Set<string>> {
    if (items.length === 0) return new Set();
    const ids = items.map((item) => item.attempt.deliveryId);
    const updated = await this.moveDeliveries(
      items.map((item) => ({ ...item, deliveryId: item.attempt.deliveryId, keepsLease: false })),
    );
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

  async countLostAttempts(items: readonly CountedLostAttempts[]): Promise<void> {
    if (items.length > 0) await this.moveDeliveries(items);
  }

  /**
   * One statement for a batch: each delivery's new state is picked by its id, for those their claim still
   * leases. Returns how many moved.
   */
  private moveDeliveries(items: readonly DeliveryMove[]): Promise<number> {
    const lease = (column: string) =>
      items.every((item) => !item.keepsLease)
        ? Prisma.sql`NULL`
        : caseById(items, (item) => (item.keepsLease ? Prisma.raw(`"${column}"`) : Prisma.sql`NULL`));
    return this.sql.run(Prisma.sql`
      UPDATE "webhook_deliveries" SET
        "status" = ${caseById(items, (item) => Prisma.sql`${item.transition.status}`)},
        "attempt_count" = ${caseById(items, (item) => Prisma.sql`CAST(${item.transition.attemptCount} AS INTEGER)`)},
        "attempts_since_queued" = ${caseById(items, (item) => Prisma.sql`CAST(${item.transition.attemptsSinceQueued} AS INTEGER)`)},
        "next_attempt_at" = ${caseById(items, (item) => timestampParameter(this.provider, item.transition.nextAttemptAt))},
        "updated_at" = ${caseById(items, (item) => timestampParameter(this.provider, item.transition.at))},
        "lease_owner" = ${lease("lease_owner")}, "lease_expires_at" = ${lease("lease_expires_at")}
      WHERE ${heldBy(items)}`);
  }

  async abandonDelivery(lease: DeliveryLease, at: Date): Promise<void> {
    await this.sql.run(Prisma.sql`
      UPDATE "webhook_deliveries" SET "status" = 'failed', "next_attempt_at" = NULL, "lease_owner" = NULL,
        "lease_expires_at" = NULL, "updated_at" = ${at}
      WHERE "id" = ${lease.deliveryId} AND "lease_owner" = ${lease.leaseToken}`);
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

  async releaseDeliveries(leases: readonly DeliveryLease[], attemptMade: boolean): Promise<void> {
    // An aborted request counts as an attempt (its outcome is lost); its retry is judged by its next outcome.
    const counted = attemptMade
      ? Prisma.sql`, "attempt_count" = "attempt_count" + 1, "attempts_since_queued" = "attempts_since_queued" + 1`
      : Prisma.empty;
    await findInChunks(leases, async (chunk) => {
      await this.sql.run(Prisma.sql`
        UPDATE "webhook_deliveries" SET "lease_owner" = NULL, "lease_expires_at" = NULL ${counted}
        WHERE ${heldBy(chunk)}`);
      return [];
    });
  }
}
