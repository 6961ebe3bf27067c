import type { AuditRepository } from "./audit/audit-repository.ts";
import type { TrustedDocumentRepository } from "./documents/trusted-document-repository.ts";
import type { LifecycleEvent } from "./lifecycle/lifecycle-event.ts";
import type { LifecycleRepository } from "./lifecycle/lifecycle-repository.ts";
import type { OrganizationRepository } from "./organizations/organization-repository.ts";
import type { ReferenceRepository } from "./references/reference-repository.ts";
import type { TagRepository } from "./tags/tag-repository.ts";
import type { EndpointStartGate } from "./webhooks/endpoint-start-gate.ts";
import type { WebhookAttemptLog } from "./webhooks/webhook-attempt-log.ts";
import type { WebhookRecoveryRepository } from "./webhooks/webhook-recovery-repository.ts";
import type { WebhookRepository } from "./webhooks/webhook-repository.ts";

/*
 * The unit of work: what the domain needs from persistence, as one repository per domain, implemented once in
 * src/store/ (Prisma). Every repository method is scoped by organization where the data is. `transaction` runs
 * a unit of work atomically: services write a change and its lifecycle event through the repositories of the
 * `Store` handed to the callback (`unit.references.lockReference(...)`, `unit.lifecycle.insertEvent(...)`), so
 * both are in one transaction; once it has committed, the unit of work hands the events it inserted to the
 * `onEventsCommitted` listeners (live subscriptions, the webhook worker).
 */

/** What else a commit that inserted lifecycle events did. */
export interface CommittedUnit {
  /**
   * Whether it may have queued webhook deliveries (outbox rows): false only when the transaction is known to have
   * written none, which tells the webhook worker that it has nothing new to claim.
   */
  readonly queuedDeliveries: boolean;
}

/**
 * What became of a unit of work the database aborted in favour of a concurrent one (a deadlock, a serialization
 * failure): run again, or given up after the last attempt (the caller is then told to retry later).
 */
export type ContendedUnitOutcome = "retried" | "gave_up";

/** Told after a commit, with the lifecycle events the transaction inserted. Must not throw. */
export type EventsCommittedListener = (events: readonly LifecycleEvent[], unit: CommittedUnit) => void;

export interface Store {
  /**
   * Runs `work` in one transaction. When the database aborts it in favour of a concurrent transaction (a
   * deadlock, a serialization failure), `work` runs again from the start, a few times: it must have no effect
   * outside the transaction (what it tells others goes through the unit, which tells them after the commit).
   */
  transaction<T>(work: (store: Store) => Promise<T>): Promise<T>;
  /** Calls `listener` each time a unit of work was aborted in favour of another (metrics). Returns a stop. */
  onContendedUnit(listener: (outcome: ContendedUnitOutcome) => void): () => void;
  /**
   * Calls `listener` after every commit that inserted lifecycle events (never for a rolled-back transaction).
   * A hint only: the log is the source of truth. Returns a function that stops the calls.
   */
  onEventsCommitted(listener: EventsCommittedListener): () => void;
  /** Organizations and their API keys. */
  readonly organizations: OrganizationRepository;
  /** The organizations' administrative changes (written in the transaction of each change). */
  readonly audit: AuditRepository;
  /** The organizations' registered (trusted) GraphQL documents. */
  readonly documents: TrustedDocumentRepository;
  readonly tags: TagRepository;
  /** References, their children and tag links, and the update documents reported for them. */
  readonly references: ReferenceRepository;
  /** The lifecycle log: events written with each change, listed, and pruned past retention. */
  readonly lifecycle: LifecycleRepository;
  /** Webhook endpoints and the delivery outbox. */
  readonly webhooks: WebhookRepository;
  /** Recovery, replay and the ordering summary of webhook deliveries. */
  readonly webhookRecovery: WebhookRecoveryRepository;
  /** Attempts opened before their request is sent, completed with its outcome. */
  readonly webhookAttemptLog: WebhookAttemptLog;
  /** Where the worker's requests start, ordered with the changes of their endpoints. */
  readonly webhookStarts: EndpointStartGate;
}
