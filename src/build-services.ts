import { loadConfig, loadWebhookSecretKey, type Config } from "./config.ts";
import { InProcessBudgetLedger } from "./domain/budgets/budget-ledger.ts";
import { CostBudgetService } from "./domain/budgets/cost-budget-service.ts";
import { pruneExpiredIdempotencyRecords } from "./domain/idempotency/idempotency-store.ts";
import { TrustedDocumentService } from "./domain/documents/trusted-document-service.ts";
import { LifecycleLogService } from "./domain/lifecycle/lifecycle-log-service.ts";
import { LifecycleRecorder } from "./domain/lifecycle/lifecycle-recorder.ts";
import { EventFeedService } from "./domain/live/event-feed-service.ts";
import { StreamCursors } from "./domain/live/stream-cursor.ts";
import { NodeService } from "./domain/nodes/node-service.ts";
import { AuditLogService } from "./domain/audit/audit-log-service.ts";
import { ApiKeyService } from "./domain/organizations/api-key-service.ts";
import { OrganizationService } from "./domain/organizations/organization-service.ts";
import { IngestionService } from "./domain/references/ingestion-service.ts";
import { ReferenceService } from "./domain/references/reference-service.ts";
import { ReferenceTrackingService } from "./domain/references/reference-tracking-service.ts";
import type { Services } from "./domain/services.ts";
import { systemClock, type Clock } from "./domain/shared/clock.ts";
import { CursorCodec } from "./domain/shared/cursor.ts";
import { TagService } from "./domain/tags/tag-service.ts";
import { WebhookDeliveryService } from "./domain/webhooks/webhook-delivery-service.ts";
import { WebhookOutbox } from "./domain/webhooks/webhook-outbox.ts";
import { WebhookRecoveryService } from "./domain/webhooks/webhook-recovery-service.ts";
import { WebhookService } from "./domain/webhooks/webhook-service.ts";
import { openDatabase, type Database } from "./store/database.ts";
import { explainDatabaseError } from "./store/database-hints.ts";
import { migrateDatabase, type MigrationResult } from "./store/prisma/migration-runner.ts";
import { SecretCipher } from "./store/secret-cipher.ts";
import { PostgresBudgetLedger } from "./store/sql/budget-ledger.ts";
import { SqlIdempotencyRepository } from "./store/sql/idempotency-repository.ts";
import { SqlLiveLogStore } from "./store/sql/live-log-store.ts";
import { SqlStore } from "./store/sql/sql-store.ts";
import { graphqlDocumentReader } from "./pipeline/trusted-documents/graphql-document-reader.ts";
import { AddressGuard, DnsTargetPolicy } from "./webhooks/address-guard.ts";

/*
 * The composition root's first half: database -> store -> services. app.ts adds the adapters and the processes
 * around these services; the `reftrail` command (src/cli/) uses them alone. It is a file of its own so that a
 * command loads no web-server code: importing app.ts loads Fastify, Apollo and the GraphQL schema (about a second
 * of CPU), this file only the domain, the store and the database driver.
 */

/** Every service, over one store on `database`. */
export function buildServices(
  config: Config,
  database: Database,
  clock: Clock = systemClock,
  secretCipher = new SecretCipher(() => loadWebhookSecretKey(config)),
): Services {
  const store = new SqlStore(database, secretCipher);
  store.keepEndpointChangesFor(config.webhookLeaseMs);
  const cursors = new CursorCodec(config.cursorSecret);
  // Every recorded event writes its webhook deliveries in its own transaction (the outbox).
  const recorder = new LifecycleRecorder(clock, new WebhookOutbox(config.webhookRetryScheduleMs[0] ?? 0));
  const audit = new AuditLogService(clock, cursors, store);
  const tags = new TagService(store, clock, cursors, { maxTagsPerOrganization: config.maxTagsPerOrganization }, audit);
  const lifecycleLog = new LifecycleLogService(store, clock, cursors, config.retentionMonths);
  const liveLog = new SqlLiveLogStore(database);
  const organizations = new OrganizationService(store, clock, () => lifecycleLog.retentionCutoff(), audit);
  return {
    organizations,
    apiKeys: new ApiKeyService(store, clock, organizations, audit),
    audit,
    trustedDocuments: new TrustedDocumentService(store, clock, cursors, graphqlDocumentReader, audit, {
      maxDocumentsPerOrganization: config.maxTrustedDocumentsPerOrganization,
    }),
    tags,
    references: new ReferenceService(store, clock, cursors, tags, recorder, {
      maxTagsPerReference: config.maxTagsPerReference,
    }),
    referenceTracking: new ReferenceTrackingService(store, clock, cursors, recorder, {
      extractionFailureThreshold: config.extractionFailureThreshold,
    }),
    ingestion: new IngestionService(store, clock, recorder, {
      extractionFailureThreshold: config.extractionFailureThreshold,
    }),
    lifecycleLog,
    eventFeed: new EventFeedService(
      store,
      liveLog,
      new StreamCursors(cursors, liveLog),
      () => lifecycleLog.retentionCutoff(),
      { maxWaitingPollsPerOrganization: config.eventFeedMaxWaitingPollsPerOrganization },
    ),
    nodes: new NodeService(store, lifecycleLog),
    commits: store,
    // The save-time URL check, with the same allow-list as the worker's connections.
    webhooks: new WebhookService(
      store,
      clock,
      cursors,
      new DnsTargetPolicy({
        http: new AddressGuard(config.webhookAllowedCidrs),
        broker: new AddressGuard(config.webhookBrokerAllowedCidrs, "WEBHOOK_BROKER_ALLOWED_CIDRS"),
      }),
      audit,
    ),
    webhookDeliveries: new WebhookDeliveryService(store, clock, {
      scheduleMs: config.webhookRetryScheduleMs,
      disableAfterMs: config.webhookDisableAfterMs,
      retentionMs: config.webhookDeliveryRetentionMs,
      leaseMs: config.webhookLeaseMs,
    }),
    webhookRecovery: new WebhookRecoveryService(store, clock, () => lifecycleLog.retentionCutoff(), audit, {
      replayBatchSize: config.webhookReplayBatchSize,
      replayLeaseMs: config.webhookLeaseMs,
    }),
    // One bucket per key across the instances of a PostgreSQL database; in the process that owns a SQLite file.
    budgets: new CostBudgetService(
      database.provider === "postgres" ? new PostgresBudgetLedger(database.url) : new InProcessBudgetLedger(),
      { maximum: config.costBudgetMaximum, restoreRate: config.costBudgetRestoreRate },
    ),
  };
}

/** What a `reftrail` command may call: the services, and the pruning of expired idempotency records. */
export interface CommandServices extends Services {
  /** Deletes idempotency records past their 24-hour window, in batches of `batchSize`; returns how many. */
  pruneIdempotencyRecords(batchSize: number): Promise<number>;
}

/** Applies pending migrations to DATABASE_URL; a missing database is reported with the command that creates it. */
export async function migrate(config: Config = loadConfig()): Promise<MigrationResult> {
  try {
    return await migrateDatabase(config.databaseUrl);
  } catch (error) {
    throw explainDatabaseError(error, config.databaseUrl);
  }
}

/** Reads the configuration, migrates, opens DATABASE_URL, runs `work` with the services, and closes the database. */
export async function withCommandServices<T>(work: (services: CommandServices) => Promise<T>): Promise<T> {
  const config = loadConfig();
  await migrate(config);
  // Every statement of a command runs on the executor: Prisma's client is never loaded.
  const database = await openDatabase(config.databaseUrl, { prismaClient: false, sqliteReadThread: false });
  try {
    // No command reads a webhook secret: the key is only looked up if one ever does (so none is needed here).
    const cipher = new SecretCipher(() => loadWebhookSecretKey(config));
    const idempotency = new SqlIdempotencyRepository(database, systemClock, cipher);
    return await work({
      ...buildServices(config, database, systemClock, cipher),
      pruneIdempotencyRecords: (batchSize) => pruneExpiredIdempotencyRecords(idempotency, systemClock.now(), batchSize),
    });
  } finally {
    await database.close();
  }
}
