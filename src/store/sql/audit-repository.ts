import type { AuditEvent } from "../../domain/audit/audit-event.ts";
import type { AuditEventQuery, AuditRepository } from "../../domain/audit/audit-repository.ts";
import type { SqlExecutor } from "./executor.ts";
import { toDate } from "./rows.ts";
import { Prisma } from "./sql-template.ts";
import { literalLimit } from "./literal-limit.ts";

/*
 * The audit_events table (migration 0024). Changes are stored as JSON text on both databases: they are only ever
 * read back whole, never queried into.
 */

interface AuditEventRow {
  readonly id: string;
  readonly organization_id: string;
  readonly occurred_at: unknown;
  readonly action: string;
  readonly actor_api_key_id: string | null;
  readonly actor_key_prefix: string | null;
  readonly target_type: string;
  readonly target_id: string;
  readonly changes: string;
  readonly request_id: string | null;
}

function auditEventFromRow(row: AuditEventRow): AuditEvent {
  return {
    id: row.id,
    organizationId: row.organization_id,
    occurredAt: toDate(row.occurred_at),
    action: row.action as AuditEvent["action"],
    actor:
      row.actor_api_key_id === null
        ? { kind: "cli" }
        : { kind: "api_key", apiKeyId: row.actor_api_key_id, prefix: row.actor_key_prefix ?? "" },
    target: { type: row.target_type, id: row.target_id },
    changes: JSON.parse(row.changes) as AuditEvent["changes"],
    requestId: row.request_id,
  };
}

export class SqlAuditRepository implements AuditRepository {
  constructor(private readonly sql: SqlExecutor) {}

  async insertAuditEvent(event: AuditEvent): Promise<void> {
    const apiKeyId = event.actor.kind === "api_key" ? event.actor.apiKeyId : null;
    const prefix = event.actor.kind === "api_key" ? event.actor.prefix : null;
    await this.sql.run(Prisma.sql`
      INSERT INTO "audit_events" ("id", "organization_id", "occurred_at", "action", "actor_api_key_id",
        "actor_key_prefix", "target_type", "target_id", "changes", "request_id")
      VALUES (${event.id}, ${event.organizationId}, ${event.occurredAt}, ${event.action}, ${apiKeyId}, ${prefix},
        ${event.target.type}, ${event.target.id}, ${JSON.stringify(event.changes)}, ${event.requestId})`);
  }

  async listAuditEvents(query: AuditEventQuery): Promise<AuditEvent[]> {
    // One shape whatever the filters: a filter not given compares its parameter with NULL.
    const rows = await this.sql.all<AuditEventRow>(Prisma.sql`
      SELECT "id", "organization_id", "occurred_at", "action", "actor_api_key_id", "actor_key_prefix",
        "target_type", "target_id", "changes", "request_id"
      FROM "audit_events"
      WHERE "organization_id" = ${query.organizationId}
        AND (CAST(${query.beforeId} AS TEXT) IS NULL OR "id" < ${query.beforeId})
        AND (CAST(${query.action} AS TEXT) IS NULL OR "action" = ${query.action})
        AND (CAST(${query.apiKeyId} AS TEXT) IS NULL OR "actor_api_key_id" = ${query.apiKeyId})
      ORDER BY "id" DESC
      LIMIT ${literalLimit(query.limit)}`);
    return rows.map(auditEventFromRow);
  }

  async pruneAuditEvents(cutoff: Date): Promise<number> {
    return this.sql.run(Prisma.sql`DELETE FROM "audit_events" WHERE "occurred_at" < ${cutoff}`);
  }
}
