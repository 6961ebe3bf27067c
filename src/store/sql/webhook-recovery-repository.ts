import type { LifecycleEvent, LifecycleEventType } from "../../domain/lifecycle/lifecycle-event.ts";
import type {
  HeldBackSummary,
  LogPosition,
  ReplayJob,
  ReplayLease,
  ReplaySelection,
  ReplayStanding,
  TimeWindow,
  WebhookRecoveryRepository,
} from "../../domain/webhooks/webhook-recovery-repository.ts";
import type { DatabaseProvider } from "../database.ts";
import { findInChunks } from "./in-chunks.ts";
import { eventFromRow, type EventRow } from "./lifecycle-repository.ts";
import { toDate, toNullableDate } from "./rows.ts";
import type { SqlExecutor } from "./executor.ts";
import { eventOfDelivery, orderingKeyWhenSentAgain } from "./webhook-ordering-queries.ts";
import { Prisma } from "./sql-template.ts";
import { isOneOf } from "./value-lists.ts";
import { literalLimit } from "./literal-limit.ts";

/*
 * Recovery, replay and the ordering summary, in raw SQL on the store's executor (in the unit of work's transaction
 * when there is one). Replay reads the log by the index (organization_id, occurred_at, id) in keyset batches and
 * filters by the endpoint's types and tags in the statement, so a window is never read whole.
 */

/** The endpoint's deliveries created in the window whose last attempt failed (and that no one is sending) or that were given up. */
function recoverable(endpointId: string, window: TimeWindow, now: Date): Prisma.Sql {
  return Prisma.sql`"endpoint_id" = ${endpointId} AND "created_at" >= ${window.since} AND "created_at" < ${window.until}
    AND ("status" = 'failed' OR ("status" = 'pending' AND "attempts_since_queued" > 0
      AND ("lease_expires_at" IS NULL OR "lease_expires_at" < ${now})))`;
}

interface ReplayRow {
  endpoint_id: string;
  organization_id: string;
  since: unknown;
  until: unknown;
  remaining: number | bigint;
  after_occurred_at: unknown;
  after_event_id: string | null;
}

function toReplayJob(row: ReplayRow): ReplayJob {
  const afterOccurredAt = toNullableDate(row.after_occurred_at);
  return {
    endpointId: row.endpoint_id,
    organizationId: row.organization_id,
    since: toDate(row.since),
    until: toDate(row.until),
    remaining: Number(row.remaining),
    after: afterOccurredAt && row.after_event_id ? { occurredAt: afterOccurredAt, id: row.after_event_id } : null,
  };
}

export class SqlWebhookRecoveryRepository implements WebhookRecoveryRepository {
  constructor(
    private readonly provider: DatabaseProvider,
    private readonly sql: SqlExecutor,
  ) {}

  async startReplay(job: ReplayJob, lease: ReplayLease, at: Date): Promise<boolean> {
    // The endpoint is the key: a second replay of it finds the row and inserts nothing, whichever instance asks.
    const inserted = await this.sql.run(Prisma.sql`
      INSERT INTO "webhook_replays" ("endpoint_id", "organization_id", "since", "until", "remaining",
        "after_occurred_at", "after_event_id", "lease_owner", "lease_expires_at", "created_at")
      VALUES (${job.endpointId}, ${job.organizationId}, ${job.since}, ${job.until}, ${job.remaining},
        ${job.after?.occurredAt ?? null}, ${job.after?.id ?? null}, ${lease.owner}, ${lease.expiresAt}, ${at})
      ON CONFLICT ("endpoint_id") DO NOTHING`);
    return inserted === 1;
  }

  async claimReplay(lease: ReplayLease, now: Date): Promise<ReplayJob | null> {
    const free = Prisma.sql`("lease_expires_at" IS NULL OR "lease_expires_at" < ${now})`;
    // The condition is checked again by the UPDATE itself: on PostgreSQL, an instance that claimed the same row
    // first and committed makes it fail here (its lease is in the future), so one instance resumes a replay.
    const lock = this.provider === "postgres" ? Prisma.sql`FOR UPDATE SKIP LOCKED` : Prisma.empty;
    // A disabled endpoint's replay is paused: it stays unleased until the endpoint is enabled again.
    const enabled = Prisma.sql`EXISTS (SELECT 1 FROM "webhook_endpoints" e
      WHERE e."id" = "webhook_replays"."endpoint_id" AND e."enabled" = ${true})`;
    const [row] = await this.sql.all<ReplayRow>(Prisma.sql`
      UPDATE "webhook_replays" SET "lease_owner" = ${lease.owner}, "lease_expires_at" = ${lease.expiresAt}
      WHERE "endpoint_id" = (SELECT "endpoint_id" FROM "webhook_replays" WHERE ${free} AND ${enabled}
        ORDER BY "created_at" LIMIT 1 ${lock}) AND ${free}
      RETURNING "endpoint_id", "organization_id", "since", "until", "remaining", "after_occurred_at",
        "after_event_id"`);
    return row ? toReplayJob(row) : null;
  }

  async advanceReplay(
    endpointId: string,
    after: LogPosition | null,
    remaining: number,
    lease: ReplayLease,
  ): Promise<boolean> {
    const held = Prisma.sql`"endpoint_id" = ${endpointId} AND "lease_owner" = ${lease.owner}`;
    if (remaining <= 0) return (await this.sql.run(Prisma.sql`DELETE FROM "webhook_replays" WHERE ${held}`)) === 1;
    const changed = await this.sql.run(Prisma.sql`
      UPDATE "webhook_replays" SET "remaining" = ${remaining}, "after_occurred_at" = ${after?.occurredAt ?? null},
        "after_event_id" = ${after?.id ?? null}, "lease_expires_at" = ${lease.expiresAt}
      WHERE ${held}`);
    return changed === 1;
  }

  async endReplay(endpointId: string, owner: string): Promise<void> {
    await this.sql.run(Prisma.sql`
      DELETE FROM "webhook_replays" WHERE "endpoint_id" = ${endpointId} AND "lease_owner" = ${owner}`);
  }

  async releaseReplay(endpointId: string, owner: string): Promise<void> {
    await this.sql.run(Prisma.sql`
      UPDATE "webhook_replays" SET "lease_owner" = NULL, "lease_expires_at" = NULL
      WHERE "endpoint_id" = ${endpointId} AND "lease_owner" = ${owner}`);
  }

  async findReplay(endpointId: string): Promise<ReplayStanding | null> {
    const [row] = await this.sql.all<ReplayRow>(Prisma.sql`
      SELECT "endpoint_id", "organization_id", "since", "until", "remaining", "after_occurred_at", "after_event_id"
      FROM "webhook_replays" WHERE "endpoint_id" = ${endpointId}`);
    if (!row) return null;
    const { since, until, remaining } = toReplayJob(row);
    return { since, until, remaining };
  }

  async lockEndpointForReplay(endpointId: string): Promise<void> {
    // FOR SHARE: an update of the endpoint (FOR NO KEY UPDATE, or its UPDATE) waits for the chunk, and the
    // chunk for the update; the worker's reads are not held.
    if (this.provider === "postgres")
      await this.sql.all(Prisma.sql`SELECT 1 FROM "webhook_endpoints" WHERE "id" = ${endpointId} FOR SHARE`);
  }

  async countRecoverable(endpointId: string, window: TimeWindow, now: Date): Promise<number> {
    const [row] = await this.sql.all<{ n: number | bigint }>(Prisma.sql`
      SELECT COUNT(*) AS "n" FROM "webhook_deliveries" WHERE ${recoverable(endpointId, window, now)}`);
    return Number(row?.n ?? 0);
  }

  recover(endpointId: string, window: TimeWindow, at: Date): Promise<number> {
    // A fresh retry schedule; attempt_count keeps every earlier attempt (as for a re-send by hand). On an ordered
    // endpoint each keeps its reference's order: of one reference's recovered deliveries the earliest is the head,
    // and the later pending ones (recovered or not) wait behind it (migration 0014's triggers).
    return this.sql.run(Prisma.sql`
      UPDATE "webhook_deliveries" SET "status" = 'pending', "attempts_since_queued" = 0, "next_attempt_at" = ${at},
        "lease_owner" = NULL, "lease_expires_at" = NULL, "updated_at" = ${at}, "dropped_reason" = NULL,
        "ordering_key" = ${orderingKeyWhenSentAgain(this.provider)}
      WHERE ${recoverable(endpointId, window, at)}`);
  }

  async countReplayable(selection: ReplaySelection): Promise<number> {
    const [row] = await this.sql.all<{ n: number | bigint }>(Prisma.sql`
      SELECT COUNT(*) AS "n" FROM "lifecycle_events" e WHERE ${this.selected(selection)}`);
    return Number(row?.n ?? 0);
  }

  async replayableEvents(
    selection: ReplaySelection,
    after: LogPosition | null,
    limit: number,
  ): Promise<LifecycleEvent[]> {
    // PostgreSQL: the ids as uuid values, as the (organization_id, occurred_at, id) index holds them (migration
    // 0016); the order is the partition key's, so the months are read one after the other from the cursor's.
    const postgres = this.provider === "postgres";
    const id = Prisma.raw(postgres ? `e."id"::uuid` : `e."id"`);
    let keyset = Prisma.empty;
    if (after && postgres) {
      keyset = Prisma.sql`AND (e."occurred_at", ${id}) > (${after.occurredAt}, CAST(${after.id} AS UUID))
        AND e."occurred_at" >= ${after.occurredAt}`;
    } else if (after) {
      keyset = Prisma.sql`AND (e."occurred_at" > ${after.occurredAt} OR (e."occurred_at" = ${after.occurredAt} AND e."id" > ${after.id}))`;
    }
    const rows = await this.sql.all<EventRow>(Prisma.sql`
      SELECT e."id", e."organization_id", e."reference_id", e."type", e."occurred_at", e."detail", e."reference_tags"
      FROM "lifecycle_events" e
      WHERE ${this.selected(selection)} ${keyset}
      ORDER BY e."occurred_at", ${id}
      LIMIT ${literalLimit(limit)}`);
    return rows.map(eventFromRow);
  }

  async findDeliveryIdsOfEvents(endpointId: string, eventIds: readonly string[]): Promise<Map<string, string>> {
    if (eventIds.length === 0) return new Map();
    // No ORDER BY: with one, SQLite walked the index (endpoint_id, id) to skip the sort, reading every delivery
    // the endpoint ever had for each chunk (a replay's chunks got slower as its own deliveries piled up). Without
    // it, the index (endpoint_id, event_id) answers each event by a lookup.
    const rows = await findInChunks(eventIds, (chunk) =>
      this.sql.all<{ id: string; event_id: string }>(Prisma.sql`
        SELECT "id", "event_id" FROM "webhook_deliveries"
        WHERE "endpoint_id" = ${endpointId} AND ${isOneOf(this.provider, Prisma.sql`"event_id"`, chunk)}`),
    );
    // An event has one delivery per endpoint; should there be more, the first made (the smallest UUIDv7) keeps
    // its webhook-id.
    const byEvent = new Map<string, string>();
    for (const row of rows) {
      const kept = byEvent.get(row.event_id);
      if (kept === undefined || row.id < kept) byEvent.set(row.event_id, row.id);
    }
    return byEvent;
  }

  async requeueForReplay(deliveryIds: readonly string[], at: Date, ordered: boolean): Promise<void> {
    if (deliveryIds.length === 0) return;
    const orderingKey = ordered
      ? Prisma.sql`(SELECT e."reference_id" FROM "lifecycle_events" e WHERE ${eventOfDelivery(this.provider)})`
      : Prisma.sql`NULL`;
    // A delivery in flight is sent again once its request's lease has ended (a lease outlasts its request), not
    // beside it: its webhook-id never has two requests at once.
    const dueAfterInFlight = Prisma.sql`CASE WHEN "lease_expires_at" > ${at} THEN "lease_expires_at" ELSE ${at} END`;
    await findInChunks(deliveryIds, async (chunk) => {
      await this.sql.run(Prisma.sql`
        UPDATE "webhook_deliveries" SET "status" = 'pending', "attempts_since_queued" = 0,
          "next_attempt_at" = ${dueAfterInFlight}, "lease_owner" = NULL, "lease_expires_at" = NULL,
          "updated_at" = ${at}, "ordering_key" = ${orderingKey}, "dropped_reason" = NULL
        WHERE "id" IN (${Prisma.join(chunk)})`);
      return [];
    });
  }

  async deferBehindInFlight(deliveryIds: readonly string[], at: Date): Promise<void> {
    if (deliveryIds.length === 0) return;
    // Run after the chunk's deliveries joined their order: on PostgreSQL the triggers then hold the row lock of
    // each reference's later head, so no claim can lease one between this statement and the commit.
    const laterInFlight = Prisma.sql`FROM "webhook_deliveries" f
      WHERE f."endpoint_id" = "webhook_deliveries"."endpoint_id"
        AND f."ordering_key" = "webhook_deliveries"."ordering_key" AND f."status" = 'pending'
        AND f."lease_expires_at" > ${at}
        AND (f."event_occurred_at" > "webhook_deliveries"."event_occurred_at"
          OR (f."event_occurred_at" = "webhook_deliveries"."event_occurred_at"
            AND f."event_id" > "webhook_deliveries"."event_id"))`;
    await findInChunks(deliveryIds, async (chunk) => {
      await this.sql.run(Prisma.sql`
        UPDATE "webhook_deliveries" SET "next_attempt_at" = (SELECT MAX(f."lease_expires_at") ${laterInFlight})
        WHERE "id" IN (${Prisma.join(chunk)}) AND "status" = 'pending' AND "ordering_key" IS NOT NULL
          AND EXISTS (SELECT 1 ${laterInFlight})`);
      return [];
    });
  }

  async countPending(deliveryIds: readonly string[]): Promise<number> {
    if (deliveryIds.length === 0) return 0;
    // The status is counted, not filtered on: with "status" = 'pending' in the WHERE, SQLite read the due index's
    // whole pending part (every endpoint's backlog) instead of looking the ids up, on every poll of a replay. The
    // ids are one bound list: as `IN ($1, …, $500)` each poll was planned anew on PostgreSQL (about 9 ms).
    const [row] = await this.sql.all<{ n: number | bigint | null }>(Prisma.sql`
      SELECT SUM(CASE WHEN "status" = 'pending' THEN 1 ELSE 0 END) AS "n" FROM "webhook_deliveries"
      WHERE ${isOneOf(this.provider, Prisma.sql`"id"`, deliveryIds)}`);
    return Number(row?.n ?? 0);
  }

  releaseOrder(endpointId: string): Promise<number> {
    return this.sql.run(Prisma.sql`
      UPDATE "webhook_deliveries" SET "ordering_key" = NULL
      WHERE "endpoint_id" = ${endpointId} AND "status" = 'pending' AND "ordering_key" IS NOT NULL`);
  }

  async heldBack(endpointId: string): Promise<HeldBackSummary> {
    const waiting = Prisma.sql`w."endpoint_id" = ${endpointId} AND w."status" = 'pending'
      AND w."ordering_key" IS NOT NULL AND w."held"`;
    const [counts] = await this.sql.all<{ deliveries: number | bigint; refs: number | bigint }>(Prisma.sql`
      SELECT COUNT(*) AS "deliveries", COUNT(DISTINCT w."ordering_key") AS "refs"
      FROM "webhook_deliveries" w WHERE ${waiting}`);
    const [oldest] = await this.sql.all<{
      id: string;
      ordering_key: string;
      event_id: string;
      event_type: string;
      event_occurred_at: unknown;
    }>(Prisma.sql`
      SELECT w."id", w."ordering_key", w."event_id", w."event_type", w."event_occurred_at"
      FROM "webhook_deliveries" w WHERE ${waiting}
      ORDER BY w."event_occurred_at", w."event_id" LIMIT 1`);
    return {
      references: Number(counts?.refs ?? 0),
      deliveries: Number(counts?.deliveries ?? 0),
      oldest: oldest
        ? {
            deliveryId: oldest.id,
            referenceId: oldest.ordering_key,
            eventId: oldest.event_id,
            eventType: oldest.event_type as LifecycleEventType,
            occurredAt: toDate(oldest.event_occurred_at),
          }
        : null,
    };
  }

  /** The selection's events of `lifecycle_events e`: window, types, and tag snapshot. */
  private selected(selection: ReplaySelection): Prisma.Sql {
    const types = selection.eventTypes
      ? Prisma.sql`AND ${isOneOf(this.provider, Prisma.sql`e."type"`, selection.eventTypes)}`
      : Prisma.empty;
    let tags = Prisma.empty;
    if (selection.tagIds !== null) {
      if (selection.tagIds.length === 0) tags = Prisma.sql`AND 1 = 0`;
      else {
        const ids = selection.tagIds;
        tags =
          this.provider === "postgres"
            ? Prisma.sql`AND EXISTS (SELECT 1 FROM jsonb_array_elements(e."reference_tags") AS snapshot(tag)
                WHERE ${isOneOf(this.provider, Prisma.sql`snapshot.tag->>'id'`, ids)})`
            : Prisma.sql`AND EXISTS (SELECT 1 FROM json_each(e."reference_tags") AS snapshot
                WHERE ${isOneOf(this.provider, Prisma.sql`json_extract(snapshot."value", '$.id')`, ids)})`;
      }
    }
    // PostgreSQL's (organization_id, occurred_at, id) index holds the ids as uuid values (migration 0016).
    const organization =
      this.provider === "postgres"
        ? Prisma.sql`e."organization_id"::uuid = CAST(${selection.organizationId} AS UUID)`
        : Prisma.sql`e."organization_id" = ${selection.organizationId}`;
    return Prisma.sql`${organization}
      AND e."occurred_at" >= ${selection.since} AND e."occurred_at" < ${selection.until} ${types} ${tags}`;
  }
}
