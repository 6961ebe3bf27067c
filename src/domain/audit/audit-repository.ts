import type { AuditAction, AuditEvent } from "./audit-event.ts";

/** Which audit events a page lists: the organization's, newest first, before a position, optionally filtered. */
export interface AuditEventQuery {
  readonly organizationId: string;
  /** Events strictly older than this id (ids are UUIDv7: id order is creation order); null from the newest. */
  readonly beforeId: string | null;
  readonly action: AuditAction | null;
  readonly apiKeyId: string | null;
  /** Rows to read: the page size plus one, which tells whether a next page exists. */
  readonly limit: number;
}

/** The audit_events table (src/store/sql/audit-repository.ts). Inside `store.transaction`, writes in it. */
export interface AuditRepository {
  insertAuditEvent(event: AuditEvent): Promise<void>;
  listAuditEvents(query: AuditEventQuery): Promise<AuditEvent[]>;
  /** Deletes events that occurred before `cutoff` (retention, 400 days); returns how many. */
  pruneAuditEvents(cutoff: Date): Promise<number>;
}
