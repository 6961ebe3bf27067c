import type { TestServer } from "./test-server.ts";

/**
 * Ids of the organization's events of one type in the log's live order, as the database numbers it
 * (src/domain/live/log-position.ts): `lifecycle_events.position` on SQLite, the transaction's commit number then
 * the position inside the transaction on PostgreSQL (migration 0006).
 */
export async function liveOrderIds(
  server: TestServer,
  filter: { readonly type: string; readonly referenceId?: string },
): Promise<string[]> {
  const { prisma, provider } = server.database;
  const reference = filter.referenceId ?? null;
  const rows =
    provider === "postgres"
      ? await prisma.$queryRaw<{ id: string }[]>`
          SELECT e."id" FROM "lifecycle_commits" c
          JOIN "lifecycle_events" e
            ON e."organization_id" = c."organization_id" AND e."transaction_id" = c."transaction_id"
          WHERE e."organization_id" = ${server.organizationId} AND e."type" = ${filter.type}
            AND (${reference}::text IS NULL OR e."reference_id" = ${reference})
          ORDER BY c."position", e."position"`
      : await prisma.$queryRaw<{ id: string }[]>`
          SELECT "id" FROM "lifecycle_events"
          WHERE "organization_id" = ${server.organizationId} AND "type" = ${filter.type}
            AND (${reference} IS NULL OR "reference_id" = ${reference})
          ORDER BY "position"`;
  return rows.map((row) => row.id);
}
