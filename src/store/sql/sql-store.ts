import type { LifecycleEvent } from "../../domain/lifecycle/lifecycle-event.ts";
import type { LifecycleRepository } from "../../domain/lifecycle/lifecycle-repository.ts";
import type { OrganizationRepository } from "../../domain/organizations/organization-repository.ts";
import type { ReferenceRepository } from "../../domain/references/reference-repository.ts";
import type { CommittedUnit, EventsCommittedListener, Store } from "../../domain/store.ts";
import type { TagRepository } from "../../domain/tags/tag-repository.ts";
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

/*
 * The only implementation of the domain's Store: the unit of work, and the repositories it hands out (one per
 * domain, src/store/sql/*-repository.ts). The unit of work is passed explicitly: `transaction` builds a store
 * whose repositories hold the unit's executor (src/store/sql/executor.ts), so every statement they send runs in
 * the unit's transaction. Every list method takes `limit + 1`-style limits from the caller and orders by an
 * indexed keyset; relation lookups take many ids at once so that DataLoaders can batch.
 *
 * Prisma's model API (`this.client` of a repository) serves only administration that never runs inside a unit
 * of work and is not on a hot path (organizations counted and listed, API keys listed and revoked, tags listed).
 */

/** One transaction's lifecycle events, handed to the listeners once it has committed, and its outbox rows. */
interface UnitOfWork {
  readonly events: LifecycleEvent[];
  deliveriesQueued: number;
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
  ) {}

  get organizations(): OrganizationRepository {
    this.organizationRepository ??= new SqlOrganizationRepository(this.database, this.sql, this.unit !== null);
    return this.organizationRepository;
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
    this.webhookStore ??= new SqlWebhookRepository(
      this.database.provider,
      this.sql,
      this.secretCipher,
      unit ? (count) => (unit.deliveriesQueued += count) : undefined,
    );
    return this.webhookStore;
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
  private tagRepository: TagRepository | undefined;
  private referenceRepository: ReferenceRepository | undefined;
  private lifecycleRepository: LifecycleRepository | undefined;
  private webhookStore: WebhookRepository | undefined;
  private webhookRecoveryRepository: WebhookRecoveryRepository | undefined;
  private attemptLog: WebhookAttemptLog | undefined;

  async transaction<T>(work: (store: Store) => Promise<T>): Promise<T> {
    if (this.unit) return work(this);
    const unit: UnitOfWork = { events: [], deliveriesQueued: 0 };
    const result = await this.database.sql.transaction((sql) =>
      work(new SqlStore(this.database, this.secretCipher, sql, unit, this.committedListeners)),
    );
    this.publishCommitted(unit.events, { queuedDeliveries: unit.deliveriesQueued > 0 });
    return result;
  }

  onEventsCommitted(listener: EventsCommittedListener): () => void {
    this.committedListeners.add(listener);
    return () => this.committedListeners.delete(listener);
  }

  private publishCommitted(events: readonly LifecycleEvent[], committed: CommittedUnit): void {
    if (events.length === 0) return;
    for (const listener of this.committedListeners) listener(events, committed);
  }
}
