import type { LifecycleEvent } from "../../domain/lifecycle/lifecycle-event.ts";
import type { LifecycleRepository } from "../../domain/lifecycle/lifecycle-repository.ts";
import type { AuditRepository } from "../../domain/audit/audit-repository.ts";
import { SqlAuditRepository } from "./audit-repository.ts";
import type { OrganizationRepository } from "../../domain/organizations/organization-repository.ts";
import type { ReferenceRepository } from "../../domain/references/reference-repository.ts";
import type { CommittedUnit, ContendedUnitOutcome, EventsCommittedListener, Store } from "../../domain/store.ts";
import type { TagRepository } from "../../domain/tags/tag-repository.ts";
import type { TrustedDocumentRepository } from "../../domain/documents/trusted-document-repository.ts";
import { SqlTrustedDocumentRepository } from "./trusted-document-repository.ts";
import type { WebhookRepository } from "../../domain/webhooks/webhook-repository.ts";
import type { Database } from "../database.ts";
import { SqlLifecycleRepository } from "./lifecycle-repository.ts";
import { SqlOrganizationRepository } from "./organization-repository.ts";
import { SqlReferenceRepository } from "./reference-repository.ts";
import { SqlTagRepository } from "./tag-repository.ts";
import type { SecretCipher } from "../secret-cipher.ts";
import type { SqlExecutor } from "./executor.ts";
import { SqlWebhookRepository } from "./webhook-repository.ts";
import type { WebhookAttemptLog } from "../../domain/webhooks/webhook-attempt-log.ts";
import type { WebhookRecoveryRepository } from "../../domain/webhooks/webhook-recovery-repository.ts";
import { SqlWebhookAttemptLog } from "./webhook-attempt-log.ts";
import { SqlWebhookRecoveryRepository } from "./webhook-recovery-repository.ts";
import { ContendedUnitError } from "../database-availability.ts";
import type { EndpointStartGate } from "../../domain/webhooks/endpoint-start-gate.ts";
import {
  CommittedEndpointChanges,
  InProcessEndpointStartGate,
  LockingEndpointStartGate,
  type EndpointChange,
} from "./endpoint-start-gate.ts";
import { SqlWebhookEndpointRepository } from "./webhook-endpoint-repository.ts";
import { isTransactionConflict, retryDelayMs, UNIT_ATTEMPTS } from "./unit-retry.ts";
import { ensureLogMonths, MissingLogMonthError } from "./log-months.ts";

/*
 * The only implementation of the domain's Store: the unit of work, and the repositories it hands out (one per
 * domain, src/store/sql/*-repository.ts). The unit of work is passed explicitly: `transaction` builds a store
 * whose repositories hold the unit's executor (src/store/sql/executor.ts), so every statement they send runs in
 * the unit's transaction. Every list method takes `limit + 1`-style limits from the caller and orders by an
 * indexed keyset; relation lookups take many ids at once so that DataLoaders can batch.
 *
 * Every repository statement, administration included (organizations counted and listed, API keys listed and
 * revoked), runs as SQL on the executor; Prisma's model API is not used here (it serves the tests).
 *
 * The lock order (PostgreSQL; SQLite runs one write transaction at a time). Every unit takes its row locks in
 * this order, so that no two units wait for each other in a cycle (docs/decisions.md, "One lock order"):
 *   1. references (shipping_references), several in id order: a reference whose tags change, a parent whose
 *      children are reported, the carriers of a tag being renamed or deleted (locked before the tag, although
 *      they are what the rename changes: a link's writer holds its reference when the link's foreign key check
 *      takes the tag, so the tag cannot come first);
 *   2. an organization (the count behind the tag limit and the webhook endpoint limit) or a webhook endpoint (no
 *      unit holds both: creating an endpoint locks its organization, and no existing endpoint);
 *   3. tags: FOR KEY SHARE by the foreign key check of a new link (reference_tags, webhook_endpoint_tags), FOR
 *      UPDATE by a rename or a deletion, which also waits for every link to it being added;
 *   4. link rows (reference_tags, webhook_endpoint_tags), written or deleted, a tag's by the cascade of its
 *      deletion;
 *   5. webhook order locks: the transaction-scoped advisory lock per (endpoint, ordering key) that the claim
 *      heads' triggers (migration 0014) take for each ordered delivery a statement writes. A statement that writes
 *      several references' deliveries takes them all first, each once, sorted by the lock's key
 *      (lockOrdersInSortedOrder, webhook-ordering-queries.ts): the outbox insert of a unit that wrote events
 *      (holding their references, 1), an outcome batch (after its endpoints' updates, 2: recordAttempts in
 *      webhook-delivery-service.ts), lost attempts counted by a claim, a disable's failing of pending deliveries
 *      (after the endpoint's update, 2). The triggers then find them held;
 *   6. webhook delivery rows: those a statement writes, and those its triggers move in or out of "held" (of the
 *      order locks the trigger holds). The claim leases rows FOR UPDATE SKIP LOCKED and changes no order (it never
 *      waits); the start check reads endpoints FOR SHARE in id order and holds nothing else.
 * Each place that takes one says so: lockReference(s) (reference-repository.ts), lockCarriersAndTag
 * (tag-repository.ts), linkTags, replaceEndpointTags (webhook-endpoint-repository.ts), lockOrdersInSortedOrder's
 * callers (webhook-delivery-repository.ts, webhook-claim-repository.ts). Not yet sorted: a recovery's or a
 * replay's multi-row requeue, whose triggers take the order locks of one endpoint's references in row order. A
 * unit the database aborts all the same (a carrier that appeared between a rename's two looks, a deadlock nobody
 * foresaw) runs again: see `transaction`.
 */

/** One transaction's lifecycle events, handed to the listeners once it has committed, and its outbox rows. */
interface UnitOfWork {
  readonly events: LifecycleEvent[];
  deliveriesQueued: number;
  /** The webhook endpoints it changed or deleted (SQLite: recorded at its commit, see endpoint-start-gate.ts). */
  readonly endpointChanges: EndpointChange[];
}

export class SqlStore implements Store {
  constructor(
    private readonly database: Database,
    /** Webhook signing secrets are stored encrypted with it. */
    private readonly secretCipher: SecretCipher,
    /** Runs every statement of the store: the driver, or the transaction of this store's unit of work. */
    private readonly sql: SqlExecutor = database.sql,
    private readonly unit: UnitOfWork | null = null,
    private readonly committedListeners = new Set<EventsCommittedListener>(),
    private readonly contendedListeners = new Set<(outcome: ContendedUnitOutcome) => void>(),
    /** SQLite: the endpoint changes committed in this process, which the worker's start check reads. */
    private readonly endpointChanges = new CommittedEndpointChanges(),
  ) {}

  /**
   * SQLite: how long a committed endpoint change is remembered for the worker's start check; at least the
   * webhook lease (a claim is started within its lease or not at all).
   */
  keepEndpointChangesFor(ms: number): void {
    this.endpointChanges.keptMs = Math.max(this.endpointChanges.keptMs, ms);
  }

  get organizations(): OrganizationRepository {
    this.organizationRepository ??= new SqlOrganizationRepository(this.database, this.sql, this.unit !== null);
    return this.organizationRepository;
  }

  get audit(): AuditRepository {
    this.auditRepository ??= new SqlAuditRepository(this.sql);
    return this.auditRepository;
  }

  get documents(): TrustedDocumentRepository {
    this.documentRepository ??= new SqlTrustedDocumentRepository(this.database, this.sql);
    return this.documentRepository;
  }

  get tags(): TagRepository {
    this.tagRepository ??= new SqlTagRepository(this.database, this.sql, this.unit !== null);
    return this.tagRepository;
  }

  get references(): ReferenceRepository {
    this.referenceRepository ??= new SqlReferenceRepository(this.database, this.sql, this.unit !== null);
    return this.referenceRepository;
  }

  /** Its inserted events go to this unit's list (published at commit), or straight to the listeners outside one. */
  get lifecycle(): LifecycleRepository {
    // Outside a unit, an insert is its own commit, and what else went with it is not known.
    this.lifecycleRepository ??= new SqlLifecycleRepository(this.database, this.sql, this.unit, (events) =>
      this.publishCommitted(events, { queuedDeliveries: true }),
    );
    return this.lifecycleRepository;
  }

  get webhooks(): WebhookRepository {
    const unit = this.unit;
    // SQLite: changes recorded once committed (at once outside a unit); PostgreSQL's start check reads the rows.
    const recordChanges =
      this.database.provider !== "sqlite"
        ? undefined
        : unit
          ? (changes: readonly EndpointChange[]) => unit.endpointChanges.push(...changes)
          : (changes: readonly EndpointChange[]) => this.endpointChanges.committed(changes);
    this.webhookStore ??= new SqlWebhookRepository(
      this.database.provider,
      this.sql,
      this.secretCipher,
      unit ? (count) => (unit.deliveriesQueued += count) : undefined,
      recordChanges,
    );
    return this.webhookStore;
  }

  get webhookStarts(): EndpointStartGate {
    this.startGate ??=
      this.database.provider === "sqlite"
        ? new InProcessEndpointStartGate(this.endpointChanges, (ids) =>
            new SqlWebhookEndpointRepository("sqlite", this.database.sql, this.secretCipher).findEndpointsByIds(ids),
          )
        : new LockingEndpointStartGate(this.database.sql, (sql, ids) =>
            new SqlWebhookEndpointRepository("postgres", sql, this.secretCipher).findEndpointsByIds(ids),
          );
    return this.startGate;
  }

  get webhookRecovery(): WebhookRecoveryRepository {
    this.webhookRecoveryRepository ??= new SqlWebhookRecoveryRepository(this.database.provider, this.sql);
    return this.webhookRecoveryRepository;
  }

  get webhookAttemptLog(): WebhookAttemptLog {
    this.attemptLog ??= new SqlWebhookAttemptLog(this.sql);
    return this.attemptLog;
  }

  private organizationRepository: OrganizationRepository | undefined;
  private documentRepository: TrustedDocumentRepository | undefined;
  private auditRepository: AuditRepository | undefined;
  private tagRepository: TagRepository | undefined;
  private referenceRepository: ReferenceRepository | undefined;
  private lifecycleRepository: LifecycleRepository | undefined;
  private webhookStore: WebhookRepository | undefined;
  private webhookRecoveryRepository: WebhookRecoveryRepository | undefined;
  private attemptLog: WebhookAttemptLog | undefined;
  private startGate: EndpointStartGate | undefined;

  /**
   * Runs `work` in a transaction; a unit inside a unit is part of it. A unit the database aborted to let another
   * go on (a deadlock, a serialization failure: unit-retry.ts) runs again, up to UNIT_ATTEMPTS times in all,
   * after a short randomized wait; then it fails with ContendedUnitError, which callers answer 503 with
   * Retry-After. A unit that met a month of the log with no partition yet (PostgreSQL, log-months.ts) runs again
   * once the month is made. Running it again is safe because nothing of a unit leaves it before the commit: its events go
   * to the listeners after the commit (a fresh list per attempt), its webhook deliveries are outbox rows of the
   * transaction, an Idempotency-Key's record is written around the request, not inside its unit, and the
   * services' units change nothing outside the store they are handed (Store.transaction says so).
   */
  async transaction<T>(work: (store: Store) => Promise<T>): Promise<T> {
    if (this.unit) return work(this);
    for (let attempt = 1; ; attempt++) {
      const unit: UnitOfWork = { events: [], deliveriesQueued: 0, endpointChanges: [] };
      try {
        const result = await this.database.sql.transaction((sql) =>
          work(
            new SqlStore(
              this.database,
              this.secretCipher,
              sql,
              unit,
              this.committedListeners,
              this.contendedListeners,
              this.endpointChanges,
            ),
          ),
        );
        // Before the caller is answered: from here on, the worker's start check sees these changes.
        if (unit.endpointChanges.length > 0) this.endpointChanges.committed(unit.endpointChanges);
        this.publishCommitted(unit.events, { queuedDeliveries: unit.deliveriesQueued > 0 });
        return result;
      } catch (error) {
        if (error instanceof MissingLogMonthError && attempt < UNIT_ATTEMPTS) {
          // An event far from now, whose month the log had no partition for: made outside the lost transaction.
          await ensureLogMonths(this.database, error.instants);
          continue;
        }
        if (!isTransactionConflict(error)) throw error;
        const outcome = attempt < UNIT_ATTEMPTS ? "retried" : "gave_up";
        for (const listener of this.contendedListeners) listener(outcome);
        if (outcome === "gave_up") throw new ContendedUnitError(attempt, error);
        await new Promise((resolve) => setTimeout(resolve, retryDelayMs(attempt)));
      }
    }
  }

  onEventsCommitted(listener: EventsCommittedListener): () => void {
    this.committedListeners.add(listener);
    return () => this.committedListeners.delete(listener);
  }

  onContendedUnit(listener: (outcome: ContendedUnitOutcome) => void): () => void {
    this.contendedListeners.add(listener);
    return () => this.contendedListeners.delete(listener);
  }

  private publishCommitted(events: readonly LifecycleEvent[], committed: CommittedUnit): void {
    if (events.length === 0) return;
    for (const listener of this.committedListeners) listener(events, committed);
  }
}
