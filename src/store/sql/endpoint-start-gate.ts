import type { EndpointStartGate } from "../../domain/webhooks/endpoint-start-gate.ts";
import type { WebhookEndpoint } from "../../domain/webhooks/webhook-models.ts";
import type { SqlExecutor, TransactionalExecutor } from "./executor.ts";
import { Prisma } from "./sql-template.ts";
import { isOneOf } from "./value-lists.ts";

/*
 * The two implementations of the domain's EndpointStartGate (src/domain/webhooks/endpoint-start-gate.ts), one per
 * database, both ordering the worker's request starts with every change of their endpoints (docs/decisions.md,
 * "Endpoint changes stop the requests claimed ahead"):
 * - PostgreSQL, where several instances share the database: the check reads the endpoints' versions FOR SHARE in
 *   a short transaction that commits only after the requests have begun. A change's UPDATE or DELETE takes a
 *   lock that conflicts: it waits for the checks in progress, and a check that comes after it waits for its
 *   commit and then reads the new version (or finds the row gone).
 * - SQLite, one instance per database file: changes are remembered in the process when they commit, before the
 *   change's caller is answered, and the check reads that record synchronously, right before the requests begin.
 *   It costs no statement unless an endpoint changed.
 */

/** An endpoint a statement changed, with its new version; `version: null` when it was deleted. */
export interface EndpointChange {
  readonly id: string;
  readonly version: number | null;
}

/** SQLite: how long a committed change is remembered unless `keptMs` says otherwise. */
const DEFAULT_KEPT_MS = 60 * 60 * 1000;
/** SQLite: an endpoint read again this many times, still older than its last change, fails the check. */
const MAX_REREADS = 3;

/**
 * SQLite: the endpoint changes committed in this process, each endpoint's latest. A change matters to claims read
 * before it, which are started within their lease or not at all: it is remembered for `keptMs`, at least the lease.
 */
export class CommittedEndpointChanges {
  private readonly latest = new Map<string, { readonly version: number | null; readonly at: number }>();
  private nextPruneAt = 0;

  constructor(public keptMs = DEFAULT_KEPT_MS) {}

  /** Called once the changes have committed, before anyone is told of them. */
  committed(changes: readonly EndpointChange[]): void {
    const at = Date.now();
    for (const change of changes) {
      const known = this.latest.get(change.id);
      // A deletion is final; versions only grow.
      if (known && (known.version === null || (change.version !== null && change.version <= known.version))) continue;
      this.latest.set(change.id, { version: change.version, at });
    }
    if (at >= this.nextPruneAt) this.prune(at);
  }

  /** Whether a change newer than this read of the endpoint has committed. */
  isNewerThan(endpoint: WebhookEndpoint): boolean {
    const known = this.latest.get(endpoint.id);
    return known !== undefined && (known.version === null || known.version > endpoint.version);
  }

  private prune(now: number): void {
    this.nextPruneAt = now + this.keptMs / 4;
    for (const [id, change] of this.latest) if (now - change.at > this.keptMs) this.latest.delete(id);
  }
}

/** SQLite: the check reads the process's record of committed changes (see the top of this file). */
export class InProcessEndpointStartGate implements EndpointStartGate {
  constructor(
    private readonly changes: CommittedEndpointChanges,
    /** Reads endpoints as committed. */
    private readonly findEndpoints: (ids: readonly string[]) => Promise<WebhookEndpoint[]>,
  ) {}

  async startWithCurrent(
    endpoints: readonly WebhookEndpoint[],
    start: (changed: ReadonlyMap<string, WebhookEndpoint | null>) => void,
  ): Promise<void> {
    const changed = new Map<string, WebhookEndpoint | null>();
    let current = endpoints;
    for (let reads = 0; ; reads++) {
      const stale = current.filter((endpoint) => this.changes.isNewerThan(endpoint));
      // No await between this look and `start`: a change that commits from here on is answered after the requests
      // have begun.
      if (stale.length === 0) break;
      if (reads === MAX_REREADS) throw new Error("webhook endpoints kept changing while their requests were checked");
      const fresh = new Map((await this.findEndpoints(stale.map((endpoint) => endpoint.id))).map((e) => [e.id, e]));
      for (const endpoint of stale) changed.set(endpoint.id, fresh.get(endpoint.id) ?? null);
      current = [...fresh.values()];
    }
    start(changed);
  }
}

/** PostgreSQL: the check holds the endpoints FOR SHARE until the requests have begun (see the top of this file). */
export class LockingEndpointStartGate implements EndpointStartGate {
  constructor(
    private readonly sql: TransactionalExecutor,
    /** Reads endpoints on the executor given (the check's transaction). */
    private readonly findEndpoints: (sql: SqlExecutor, ids: readonly string[]) => Promise<WebhookEndpoint[]>,
  ) {}

  async startWithCurrent(
    endpoints: readonly WebhookEndpoint[],
    start: (changed: ReadonlyMap<string, WebhookEndpoint | null>) => void,
  ): Promise<void> {
    if (endpoints.length === 0) return start(new Map());
    const ids = endpoints.map((endpoint) => endpoint.id);
    await this.sql.transaction(async (unit) => {
      // In id order, the order every unit that locks several endpoints takes them in.
      const rows = await unit.all<{ id: string; version: number | bigint }>(Prisma.sql`
        SELECT "id", "version" FROM "webhook_endpoints" WHERE ${isOneOf("postgres", Prisma.sql`"id"`, ids)}
        ORDER BY "id" FOR SHARE`);
      const versions = new Map(rows.map((row) => [row.id, Number(row.version)]));
      const stale = endpoints.filter((endpoint) => versions.get(endpoint.id) !== endpoint.version);
      const changed = new Map<string, WebhookEndpoint | null>(stale.map((endpoint) => [endpoint.id, null]));
      const existing = stale.filter((endpoint) => versions.has(endpoint.id)).map((endpoint) => endpoint.id);
      if (existing.length > 0)
        for (const endpoint of await this.findEndpoints(unit, existing)) changed.set(endpoint.id, endpoint);
      // Inside the transaction: the lock is let go (COMMIT) only once the requests have begun.
      start(changed);
    });
  }
}
