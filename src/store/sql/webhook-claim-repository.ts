import type { DroppedReason } from "../../domain/webhooks/webhook-models.ts";
import { THROTTLE_HORIZON_MS, THROTTLE_SPREAD_MS } from "../../domain/webhooks/throttle-schedule.ts";
import type {
  ClaimRequest,
  CountedLostAttempts,
  DeliveryLease,
  LeasedDelivery,
  DeliveryTransition,
  FinishedAttempt,
} from "../../domain/webhooks/webhook-repository.ts";
import type { DatabaseProvider } from "../database.ts";
import type { SqlExecutor } from "./executor.ts";
import { findInChunks } from "./in-chunks.ts";
import { timestampParameter } from "./rows.ts";
import { DELIVERY_COLUMNS, toDeliveryFromColumns, type DeliveryColumns } from "./webhook-delivery-rows.ts";
import { Prisma } from "./sql-template.ts";
import { lockOrdersInSortedOrder } from "./webhook-ordering-queries.ts";
import { literalLimit } from "./literal-limit.ts";

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

/**
 * SQLite: the slots of leased rows of throttled endpoints (`base_us` set), rank by rank in the claim's order per
 * endpoint (due time, id), as PostgreSQL's claim gives them.
 */
function slotInRankOrder<T extends DeliveryColumns & { base_us: number | bigint | null; interval_us: number }>(
  leased: readonly T[],
): (T & { slot_us: number | null })[] {
  const ranked = [...leased].sort(
    (a, b) => String(a.next_attempt_at).localeCompare(String(b.next_attempt_at)) || (a.id < b.id ? -1 : 1),
  );
  const ranks = new Map<string, number>();
  return ranked.map((row) => {
    if (row.base_us === null) return { ...row, slot_us: null };
    const rank = ranks.get(row.endpoint_id) ?? 0;
    ranks.set(row.endpoint_id, rank + 1);
    return { ...row, slot_us: Number(row.base_us) + rank * Number(row.interval_us) };
  });
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
   * - The endpoints visited are those with pending heads, found by a skip scan of the partial index
   *   "webhook_deliveries_due_heads_idx" (a recursive CTE: one probe per endpoint with work, issue 49.5): idle
   *   endpoints cost nothing, however many there are.
   * - Candidates are read per endpoint: each endpoint's oldest due, unleased deliveries, at most its limit, from the
   *   same index (a LATERAL subquery on PostgreSQL, a correlated `IN` on SQLite, which has no LATERAL). So a claim
   *   reads a few rows per endpoint with work, whatever the backlogs.
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
  async claimDueDeliveries(request: ClaimRequest): Promise<LeasedDelivery[]> {
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
    // An organization's rounds beyond its limit are not leased: its endpoints together get at most that many.
    const organizationLimits = [...(request.perOrganizationLimit ?? new Map<string, number>())];
    const perOrganizationFilter =
      request.defaultPerOrganizationLimit === undefined
        ? Prisma.empty
        : Prisma.sql`WHERE c."round" <= ${
            organizationLimits.length > 0
              ? Prisma.sql`CASE c."organization_id" ${Prisma.join(
                  organizationLimits.map(([id, max]) => Prisma.sql`WHEN ${id} THEN CAST(${max} AS INTEGER)`),
                  " ",
                )} ELSE CAST(${request.defaultPerOrganizationLimit} AS INTEGER) END`
              : Prisma.sql`CAST(${request.defaultPerOrganizationLimit} AS INTEGER)`
          }`;
    // Read per endpoint: the most any endpoint may get (the per-endpoint limits are applied to the ranks below).
    const readPerEndpoint = Math.min(
      limit,
      Math.max(request.defaultPerEndpointLimit, ...limited.map(([, max]) => max)),
    );
    const dueHeads = (endpoint: Prisma.Sql) => Prisma.sql`
      x."endpoint_id" = ${endpoint} AND x."status" = 'pending' AND NOT x."held" AND x."next_attempt_at" <= ${now}
        AND (x."lease_expires_at" IS NULL OR x."lease_expires_at" < ${now})
      ORDER BY x."next_attempt_at", x."id" LIMIT ${literalLimit(readPerEndpoint)}`;
    // The throttle (docs/decisions/0100-webhook-throttle-gcra.md, throttle-schedule.ts): a throttled endpoint's
    // deliveries get slots from its theoretical arrival time (TAT, its schedule row), one emission interval apart,
    // up to the horizon; "allowance" is how many slots are left before it (NULL for an unthrottled endpoint, whose
    // claim reads no schedule). The TAT is moved past the slots leased before the claim commits.
    const nowUs = Prisma.sql`CAST(${now.getTime() * 1_000} AS BIGINT)`;
    const horizonUs = Prisma.sql`CAST(${(now.getTime() + THROTTLE_HORIZON_MS) * 1_000} AS BIGINT)`;
    const intervalUs = Prisma.sql`CAST((${THROTTLE_SPREAD_MS * 1_000} + e."max_deliveries_per_second" - 1)
      / e."max_deliveries_per_second" AS BIGINT)`;
    const allowanceOf = (base: Prisma.Sql, interval: Prisma.Sql) =>
      Prisma.sql`CASE WHEN ${base} > ${horizonUs} THEN 0 ELSE (${horizonUs} - ${base}) / ${interval} + 1 END`;
    const candidates =
      this.provider === "postgres"
        ? // The schedule row is locked, SKIP LOCKED: while another instance's claim moves it, this claim leases
          // nothing for that endpoint (NULL allowance of a throttled endpoint) instead of waiting; once that claim
          // has committed, the lock reads its TAT.
          Prisma.sql`
          SELECT d."id", d."endpoint_id", e."organization_id", d."next_attempt_at", t."allowance", t."base_us",
            t."interval_us"
          FROM pending_endpoints p CROSS JOIN LATERAL (
            -- One probe of the primary key per endpoint with work (LIMIT keeps the planner from joining the whole
            -- endpoints table to the skip scan's rows, whose number it cannot estimate).
            SELECT w."id", w."organization_id", w."max_deliveries_per_second" FROM "webhook_endpoints" w
            WHERE w."id" = p."endpoint_id" LIMIT 1
          ) e LEFT JOIN LATERAL (
            SELECT s."base_us", s."interval_us", ${allowanceOf(Prisma.sql`s."base_us"`, Prisma.sql`s."interval_us"`)}
              AS "allowance"
            FROM (
              SELECT GREATEST(w."theoretical_arrival_us", ${nowUs}) AS "base_us", ${intervalUs} AS "interval_us"
              FROM "webhook_endpoint_throttles" w
              WHERE w."endpoint_id" = e."id" AND e."max_deliveries_per_second" IS NOT NULL
              FOR UPDATE SKIP LOCKED
            ) s
          ) t ON TRUE CROSS JOIN LATERAL (
            SELECT x."id", x."endpoint_id", x."next_attempt_at" FROM "webhook_deliveries" x
            WHERE (e."max_deliveries_per_second" IS NULL OR t."allowance" > 0) AND ${dueHeads(Prisma.sql`e."id"`)}
            FOR UPDATE SKIP LOCKED
          ) d ${exclusion}`
        : Prisma.sql`
          SELECT c.*, CASE WHEN c."base_us" IS NULL THEN NULL ELSE
              ${allowanceOf(Prisma.sql`c."base_us"`, Prisma.sql`c."interval_us"`)} END AS "allowance"
          FROM (
            SELECT d."id", d."endpoint_id", e."organization_id", d."next_attempt_at",
              CASE WHEN e."max_deliveries_per_second" IS NULL THEN NULL ELSE (
                SELECT MAX(w."theoretical_arrival_us", ${nowUs}) FROM "webhook_endpoint_throttles" w
                WHERE w."endpoint_id" = e."id") END AS "base_us",
              ${intervalUs} AS "interval_us"
            FROM pending_endpoints p JOIN "webhook_endpoints" e ON e."id" = p."endpoint_id"
            JOIN "webhook_deliveries" d ON d."id" IN (
              SELECT x."id" FROM "webhook_deliveries" x WHERE ${dueHeads(Prisma.sql`e."id"`)}
            ) ${exclusion}
          ) c
          -- A throttled endpoint without its schedule row gets nothing (as on PostgreSQL).
          WHERE c."base_us" IS NOT NULL OR c."interval_us" IS NULL`;
    // The endpoints with pending heads, found by a skip scan of the claim's own partial index (one probe per
    // endpoint with work, and a last one that finds none): idle endpoints cost the claim nothing, however many.
    // SQLite, which keeps no statistics here, otherwise reads every pending row through the status index and sorts
    // them, at every step (55 ms a claim beside a replay's 6,000 pending deliveries, one claim per write commit).
    const headsIndex =
      this.provider === "sqlite" ? Prisma.sql`INDEXED BY "webhook_deliveries_due_heads_idx"` : Prisma.empty;
    const nextPendingEndpoint = (after: Prisma.Sql) => Prisma.sql`(
      SELECT x."endpoint_id" FROM "webhook_deliveries" x ${headsIndex}
      WHERE x."status" = 'pending' AND NOT x."held" ${after}
      ORDER BY x."endpoint_id" LIMIT 1)`;
    const chosen = Prisma.sql`
      WITH RECURSIVE pending_endpoints ("endpoint_id") AS (
        SELECT ${nextPendingEndpoint(Prisma.empty)}
        UNION ALL
        SELECT ${nextPendingEndpoint(Prisma.sql`AND x."endpoint_id" > p."endpoint_id"`)}
        FROM pending_endpoints p WHERE p."endpoint_id" IS NOT NULL
      ), candidates AS (${candidates}), by_endpoint AS (
        SELECT c.*, ROW_NUMBER() OVER (PARTITION BY c."endpoint_id" ORDER BY c."next_attempt_at", c."id") AS "rank"
        FROM candidates c
      ), by_organization AS (
        SELECT c."id", c."organization_id", c."next_attempt_at", ROW_NUMBER() OVER (
          PARTITION BY c."organization_id" ORDER BY c."rank", c."next_attempt_at", c."id") AS "round"
        FROM by_endpoint c WHERE c."rank" <= ${perEndpoint} AND (c."allowance" IS NULL OR c."rank" <= c."allowance")
      )`;
    const lease = Prisma.sql`
      UPDATE "webhook_deliveries" SET "lease_owner" = ${owner}, "lease_expires_at" = ${leaseExpiresAt}
      WHERE "id" IN (
        SELECT c."id" FROM by_organization c ${perOrganizationFilter}
        ORDER BY c."round", c."next_attempt_at", c."id" LIMIT ${literalLimit(limit)}
      )`;
    let rows: (DeliveryColumns & { slot_us: number | bigint | string | null })[];
    if (this.provider === "postgres") {
      // An endpoint's leased deliveries are the first ranks of its candidates (the rounds take them in rank
      // order): rank r gets the slot base + (r − 1) × interval, and the TAT moves past the last.
      rows = await this.sql.all(Prisma.sql`
        ${chosen}, leased AS (${lease} RETURNING ${DELIVERY_COLUMNS}), slotted AS (
          SELECT l.*, b."base_us" + (b."rank" - 1) * b."interval_us" AS "slot_us", b."base_us", b."interval_us"
          FROM leased l JOIN by_endpoint b ON b."id" = l."id"
        ), scheduled AS (
          UPDATE "webhook_endpoint_throttles" w SET "theoretical_arrival_us" = l."next_us"
          FROM (SELECT "endpoint_id", MAX("slot_us" + "interval_us") AS "next_us" FROM slotted
            WHERE "slot_us" IS NOT NULL GROUP BY "endpoint_id") l
          WHERE w."endpoint_id" = l."endpoint_id"
        )
        SELECT ${DELIVERY_COLUMNS}, "slot_us" FROM slotted`);
    } else {
      // SQLite has one writer, and its statements change one table: the slots are given here, from the TAT the
      // claim read, and the schedule is moved by a second statement, only when the claim leased deliveries of a
      // throttled endpoint (its rows say so).
      const leased = await this.sql.all<DeliveryColumns & { base_us: number | bigint | null; interval_us: number }>(
        Prisma.sql`
        ${chosen} ${lease}
        RETURNING ${DELIVERY_COLUMNS}, (SELECT MAX(w."theoretical_arrival_us", ${nowUs})
          FROM "webhook_endpoint_throttles" w JOIN "webhook_endpoints" e ON e."id" = w."endpoint_id"
          WHERE w."endpoint_id" = "webhook_deliveries"."endpoint_id" AND e."max_deliveries_per_second" IS NOT NULL)
          AS "base_us",
          (SELECT ${intervalUs} FROM "webhook_endpoints" e WHERE e."id" = "webhook_deliveries"."endpoint_id")
          AS "interval_us"`,
      );
      const slotted = slotInRankOrder(leased);
      const next = new Map<string, number>();
      for (const row of slotted)
        if (row.slot_us !== null) next.set(row.endpoint_id, row.slot_us + Number(row.interval_us));
      if (next.size > 0) await this.moveSchedules(next);
      rows = slotted;
    }
    return rows
      .map((row) => ({
        ...toDeliveryFromColumns(row),
        slotAt: row.slot_us === null ? null : new Date(Math.ceil(Number(row.slot_us) / 1_000)),
      }))
      .sort((a, b) => (a.nextAttemptAt?.getTime() ?? 0) - (b.nextAttemptAt?.getTime() ?? 0) || (a.id < b.id ? -1 : 1));
  }

  /** Moves each endpoint's TAT to its value (SQLite; PostgreSQL moves it in the claim). */
  private async moveSchedules(next: ReadonlyMap<string, number>): Promise<void> {
    const entries = [...next];
    await this.sql.run(Prisma.sql`
      UPDATE "webhook_endpoint_throttles" SET "theoretical_arrival_us" = CASE "endpoint_id" ${Prisma.join(
        entries.map(([id, us]) => Prisma.sql`WHEN ${id} THEN CAST(${us} AS INTEGER)`),
        " ",
      )} END
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
  private async moveDeliveries(items: readonly DeliveryMove[]): Promise<number> {
    if (this.provider === "postgres" && items.length > 1) {
      // The outcomes of several references' deliveries: their order locks in one sorted order first (lock order).
      await this.sql.all(
        lockOrdersInSortedOrder(Prisma.sql`SELECT "endpoint_id", "ordering_key" FROM "webhook_deliveries"
          WHERE "id" IN (${Prisma.join(items.map((item) => item.deliveryId))})`),
      );
    }
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

  async abandonDelivery(lease: DeliveryLease, at: Date, reason: DroppedReason): Promise<void> {
    await this.sql.run(Prisma.sql`
      UPDATE "webhook_deliveries" SET "status" = 'failed', "next_attempt_at" = NULL, "lease_owner" = NULL,
        "lease_expires_at" = NULL, "updated_at" = ${at}, "dropped_reason" = ${reason}
      WHERE "id" = ${lease.deliveryId} AND "lease_owner" = ${lease.leaseToken}`);
  }

  async failPendingDeliveries(endpointIds: string | readonly string[], at: Date): Promise<number> {
    const ids = typeof endpointIds === "string" ? [endpointIds] : [...endpointIds];
    if (ids.length === 0) return 0;
    const counts = await findInChunks(ids, async (chunk) => {
      if (this.provider === "postgres") {
        // Each reference with pending deliveries has one head (unheld): its order's lock, sorted, before the rows'.
        await this.sql.all(
          lockOrdersInSortedOrder(Prisma.sql`SELECT "endpoint_id", "ordering_key" FROM "webhook_deliveries"
            WHERE "endpoint_id" IN (${Prisma.join(chunk)}) AND "status" = 'pending' AND "ordering_key" IS NOT NULL
              AND NOT "held"`),
        );
      }
      return [
        await this.sql.run(Prisma.sql`
        UPDATE "webhook_deliveries" SET "status" = 'failed', "next_attempt_at" = NULL, "lease_owner" = NULL,
          "lease_expires_at" = NULL, "updated_at" = ${at}, "dropped_reason" = 'endpoint_disabled'
        WHERE "endpoint_id" IN (${Prisma.join(chunk)}) AND "status" = 'pending'
          AND ("lease_expires_at" IS NULL OR "lease_expires_at" < ${at})`),
      ];
    });
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
