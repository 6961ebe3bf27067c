import type { LiveEvent, LiveLogStore, ReplayQuery, SettledRead, SettledReadQuery } from "../domain/live/live-feed.ts";
import { comparePositions, laterOf, type LogPosition } from "../domain/live/log-position.ts";
import type { Database } from "./database.ts";
import { lifecycleEventFromRow } from "./prisma-store.ts";
import type { Prisma } from "./__generated__/sqlite/client.ts";

/*
 * Reads of the lifecycle log in live order, `(transaction_id, position)` (see src/domain/live/log-position.ts
 * and migration 0004), served by the `(organization_id, transaction_id, position)` and
 * `(reference_id, transaction_id, position)` indexes.
 *
 * What is settled:
 * - SQLite: everything committed. `lifecycle_log_sequence` holds the last position handed out; a position is
 *   taken under the write lock, so every event up to it that is visible is all there will ever be.
 * - PostgreSQL: events of transactions below the horizon: the oldest transaction of this database still running
 *   (see findSettledEnd). Every transaction of this database below it has ended, so nothing can appear there any
 *   more. The horizon is read *before* the rows: a later snapshot sees at least everything it promised.
 */

const MAX_SEQUENCE = 9_223_372_036_854_775_807n;

type LifecycleEventRow = Awaited<ReturnType<Database["prisma"]["lifecycleEvent"]["findMany"]>>[number];

export class PrismaLiveLogStore implements LiveLogStore {
  constructor(private readonly database: Database) {}

  async readSettled(query: SettledReadQuery): Promise<SettledRead> {
    const end = await this.findSettledEnd();
    const where: Prisma.LifecycleEventWhereInput = { AND: [after(query.after)] };
    if (query.organizationIds) where.organizationId = oneOrMany(query.organizationIds);
    const rows = await this.database.prisma.lifecycleEvent.findMany({
      where,
      orderBy: [{ transactionId: "asc" }, { position: "asc" }],
      take: query.limit,
    });
    const events: LiveEvent[] = [];
    let heldBack = false;
    for (const row of rows) {
      const live = liveEventFromRow(row);
      // Ordered by transaction: after the first event above the horizon, all the rest are too.
      if (this.database.provider === "postgres" && live.position.transactionId > end.transactionId) {
        heldBack = true;
        break;
      }
      events.push(live);
    }
    const last = events.at(-1)?.position ?? query.after;
    // A full page may stop short of the settled end; otherwise the read saw everything up to it.
    const complete = heldBack || rows.length < query.limit;
    return { events, reached: complete ? laterOf(last, end) : last, heldBack };
  }

  async findSettledEnd(): Promise<LogPosition> {
    if (this.database.provider === "sqlite") {
      const [row] = await this.database.prisma.$queryRaw<{ last_position: number | bigint }[]>`
        SELECT "last_position" FROM "lifecycle_log_sequence" WHERE "id" = 1`;
      return { transactionId: 0n, sequence: BigInt(row?.last_position ?? 0) };
    }
    // The oldest transaction of *this database* still running at the snapshot, else the snapshot's xmax. The
    // cluster-wide pg_snapshot_xmin would also wait for transactions of other databases on the same server,
    // which can never write this table. A transaction running at the snapshot that has ended by the time
    // pg_stat_activity is read is left out, which is safe: its rows are already visible to the later read.
    // Transaction ids in pg_stat_activity are 32-bit; those running at one time differ in their low 32 bits.
    const [row] = await this.database.prisma.$queryRaw<{ horizon: string }[]>`
      WITH snapshot AS (SELECT pg_current_snapshot() AS current)
      SELECT COALESCE(
        (SELECT min(running::text::bigint) FROM snapshot, pg_snapshot_xip(snapshot.current) AS running
         WHERE (running::text::bigint & 4294967295) IN (
           SELECT backend_xid::text::bigint FROM pg_stat_activity
           WHERE datname = current_database() AND backend_xid IS NOT NULL
           UNION ALL
           SELECT transaction::text::bigint FROM pg_prepared_xacts WHERE database = current_database())),
        (SELECT pg_snapshot_xmax(current)::text::bigint FROM snapshot)
      )::text AS horizon`;
    return { transactionId: BigInt(row!.horizon) - 1n, sequence: MAX_SEQUENCE };
  }

  async readRange(query: ReplayQuery): Promise<LiveEvent[]> {
    const where: Prisma.LifecycleEventWhereInput = {
      organizationId: query.organizationId,
      occurredAt: { gte: query.notBefore },
      AND: [after(query.after), atOrBefore(query.until)],
    };
    if (query.referenceId !== undefined) where.referenceId = query.referenceId;
    if (query.types && query.types.length > 0) where.type = { in: [...query.types] };
    const rows = await this.database.prisma.lifecycleEvent.findMany({
      where,
      orderBy: [{ transactionId: "asc" }, { position: "asc" }],
      take: query.limit,
    });
    return rows.map(liveEventFromRow).filter((live) => comparePositions(live.position, query.until) <= 0);
  }

  async listCommittedIdsAfter(organizationId: string, position: LogPosition, limit: number): Promise<string[]> {
    const rows = await this.database.prisma.lifecycleEvent.findMany({
      where: { organizationId, AND: [after(position)] },
      select: { id: true },
      take: limit,
    });
    return rows.map((row) => row.id);
  }

  async findPosition(organizationId: string, eventId: string): Promise<LogPosition | null> {
    const row = await this.database.prisma.lifecycleEvent.findFirst({
      where: { id: eventId, organizationId },
      select: { transactionId: true, position: true },
    });
    if (!row || row.position === null || row.transactionId === null) return null;
    return { transactionId: BigInt(row.transactionId), sequence: BigInt(row.position) };
  }
}

function liveEventFromRow(row: LifecycleEventRow): LiveEvent {
  // The database fills both columns on insert (migration 0004), so neither is ever null in a read.
  return {
    event: lifecycleEventFromRow(row),
    position: { transactionId: BigInt(row.transactionId ?? 0), sequence: BigInt(row.position ?? 0) },
  };
}

function after(position: LogPosition): Prisma.LifecycleEventWhereInput {
  return {
    OR: [
      { transactionId: { gt: position.transactionId } },
      { transactionId: position.transactionId, position: { gt: position.sequence } },
    ],
  };
}

function atOrBefore(position: LogPosition): Prisma.LifecycleEventWhereInput {
  return {
    OR: [
      { transactionId: { lt: position.transactionId } },
      { transactionId: position.transactionId, position: { lte: position.sequence } },
    ],
  };
}

function oneOrMany(ids: readonly string[]): string | { in: string[] } {
  return ids.length === 1 ? ids[0]! : { in: [...ids] };
}
