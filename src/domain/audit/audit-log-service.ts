import type { Clock } from "../shared/clock.ts";
import type { CursorCodec } from "../shared/cursor.ts";
import { validationFailed } from "../shared/errors.ts";
import { isUuid, newId } from "../shared/ids.ts";
import { pageOf, type Page } from "../shared/page.ts";
import type { Store } from "../store.ts";
import {
  isAuditAction,
  type AuditAction,
  type AuditEvent,
  type ChangeContext,
  type FieldChange,
} from "./audit-event.ts";

/** How long audit events are kept (SPEC §3.1): pruned with the log by `reftrail prune` and the server's upkeep. */
export const AUDIT_RETENTION_DAYS = 400;

export interface ListAuditEventsInput {
  readonly limit: number;
  readonly cursor?: string;
  /** Only events of this action (one of AUDIT_ACTIONS; anything else is VALIDATION_FAILED). */
  readonly action?: string;
  /** Only changes made with this API key. */
  readonly apiKeyId?: string;
}

type ListPosition = { readonly i: string };
const isListPosition = (value: unknown): value is ListPosition =>
  typeof value === "object" && value !== null && isUuid(String((value as ListPosition).i));

/** What an administrative change records: what it changed, and each field from -> to (no secret, URLs masked). */
export interface AuditEntry {
  readonly organizationId: string;
  readonly action: AuditAction;
  readonly target: { readonly type: string; readonly id: string };
  readonly changes?: Readonly<Record<string, FieldChange>>;
}

/** The audit log: written by the services that make administrative changes, read by the organization. */
export class AuditLogService {
  constructor(
    private readonly clock: Clock,
    private readonly cursors: CursorCodec,
    /** Reads outside a unit of work (the listing). */
    private readonly store: Store,
  ) {}

  /**
   * Records a change inside the unit of work `store` that makes it: the event commits or rolls back with the
   * change. Callers pass only values that may be shown (never a secret or a key; URLs masked).
   */
  async record(store: Store, change: ChangeContext, entry: AuditEntry): Promise<void> {
    const event: AuditEvent = {
      id: newId(),
      organizationId: entry.organizationId,
      occurredAt: this.clock.now(),
      action: entry.action,
      actor: change.actor,
      target: entry.target,
      changes: entry.changes ?? {},
      requestId: change.requestId,
    };
    await store.audit.insertAuditEvent(event);
  }

  /**
   * The organization's audit events, newest first.
   * @throws VALIDATION_FAILED for an unknown action or a malformed key id; INVALID_CURSOR, CURSOR_FILTER_MISMATCH.
   */
  async listAuditEvents(organizationId: string, input: ListAuditEventsInput): Promise<Page<AuditEvent>> {
    const action = input.action ?? null;
    if (action !== null && !isAuditAction(action))
      throw validationFailed([
        { path: ["action"], code: "INVALID_ACTION", message: `{action} is not an audit action` },
      ]);
    const apiKeyId = input.apiKeyId?.toLowerCase() ?? null;
    if (apiKeyId !== null && !isUuid(apiKeyId))
      throw validationFailed([{ path: ["apiKeyId"], code: "INVALID_ID", message: "{apiKeyId} must be a UUID" }]);
    const filters = { scope: "audit-events", action, apiKeyId };
    const before = input.cursor ? this.cursors.decode(input.cursor, filters, isListPosition) : undefined;
    const rows = await this.store.audit.listAuditEvents({
      organizationId,
      beforeId: before?.i ?? null,
      action,
      apiKeyId,
      limit: input.limit + 1,
    });
    return pageOf(
      rows,
      input.limit,
      (event) => this.cursors.encode<ListPosition>({ i: event.id }, filters),
      before !== undefined,
    );
  }

  /** Deletes events older than the retention (400 days); returns how many. */
  pruneExpired(): Promise<number> {
    return this.store.audit.pruneAuditEvents(new Date(this.clock.now().getTime() - AUDIT_RETENTION_DAYS * 86_400_000));
  }
}
