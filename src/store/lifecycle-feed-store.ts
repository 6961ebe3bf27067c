import type { LifecycleEvent } from "../domain/lifecycle/lifecycle-event.ts";
import type {
  EventKey,
  EventKeyRangeQuery,
  LifecycleFeedStore,
  LogRangeQuery,
} from "../domain/lifecycle/lifecycle-feed.ts";
import type { Database } from "./database.ts";
import { lifecycleEventFromRow } from "./prisma-store.ts";
import type { Prisma } from "./__generated__/sqlite/client.ts";

/**
 * Range reads of the lifecycle log for live subscriptions: `(after, until]` in `(occurred_at, id)` order, for
 * some organizations. Served by the `(organization_id, occurred_at, id)` index (the feed names organizations;
 * past a few hundred it reads every organization through the `(occurred_at)` index).
 */
export class PrismaLifecycleFeedStore implements LifecycleFeedStore {
  constructor(private readonly database: Database) {}

  async listEventsInRange(query: LogRangeQuery): Promise<LifecycleEvent[]> {
    const where = rangeWhere(query);
    if (query.notBefore)
      (where.AND as Prisma.LifecycleEventWhereInput[]).push({ occurredAt: { gte: query.notBefore } });
    if (query.referenceId !== undefined) where.referenceId = query.referenceId;
    if (query.types && query.types.length > 0) where.type = { in: [...query.types] };
    const rows = await this.database.prisma.lifecycleEvent.findMany({
      where,
      orderBy: [{ occurredAt: "asc" }, { id: "asc" }],
      take: query.limit,
    });
    return rows.map(lifecycleEventFromRow);
  }

  listEventKeysInRange(query: EventKeyRangeQuery): Promise<EventKey[]> {
    return this.database.prisma.lifecycleEvent.findMany({
      where: rangeWhere(query),
      select: { id: true, organizationId: true, occurredAt: true },
      orderBy: [{ occurredAt: "asc" }, { id: "asc" }],
      take: query.limit,
    });
  }

  async findEventsByIds(ids: readonly string[]): Promise<LifecycleEvent[]> {
    if (ids.length === 0) return [];
    const rows = await this.database.prisma.lifecycleEvent.findMany({ where: { id: { in: [...ids] } } });
    return rows.map(lifecycleEventFromRow);
  }
}

function rangeWhere(query: EventKeyRangeQuery): Prisma.LifecycleEventWhereInput {
  const { after, until } = query;
  const where: Prisma.LifecycleEventWhereInput = {
    AND: [
      { OR: [{ occurredAt: { gt: after.occurredAt } }, { occurredAt: after.occurredAt, id: { gt: after.id } }] },
      { OR: [{ occurredAt: { lt: until.occurredAt } }, { occurredAt: until.occurredAt, id: { lte: until.id } }] },
    ],
  };
  if (query.organizationIds) {
    where.organizationId =
      query.organizationIds.length === 1 ? query.organizationIds[0]! : { in: [...query.organizationIds] };
  }
  return where;
}
