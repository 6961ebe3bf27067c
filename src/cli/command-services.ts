import { loadConfig, loadWebhookSecretKey, type Config } from "../config.ts";
import { pruneExpiredIdempotencyRecords } from "../domain/idempotency/idempotency-store.ts";
import { LifecycleLogService } from "../domain/lifecycle/lifecycle-log-service.ts";
import { OrganizationService } from "../domain/organizations/organization-service.ts";
import { systemClock } from "../domain/shared/clock.ts";
import { CursorCodec } from "../domain/shared/cursor.ts";
import { WebhookDeliveryService } from "../domain/webhooks/webhook-delivery-service.ts";
import { openDatabase, type Database } from "../store/database.ts";
import { explainDatabaseError } from "../store/database-hints.ts";
import { migrateDatabase, type MigrationResult } from "../store/prisma/migration-runner.ts";
import { SqlIdempotencyRepository } from "../store/sql/idempotency-repository.ts";
import { SqlStore } from "../store/sql/sql-store.ts";
import { SecretCipher } from "../store/secret-cipher.ts";

/**
 * The services the `reftrail` commands use. They are built here rather than by app.ts's `buildServices`,
 * because app.ts loads Fastify, Apollo and the GraphQL schema (about 1.5 s of CPU) and a command must answer in
 * well under a second.
 */
function buildCommandServices(config: Config, database: Database) {
  // No command reads a webhook secret: the key is only looked up if one ever does (so none is needed here).
  const cipher = new SecretCipher(() => loadWebhookSecretKey(config));
  const store = new SqlStore(database, cipher);
  const idempotency = new SqlIdempotencyRepository(database, systemClock, cipher);
  const lifecycleLog = new LifecycleLogService(
    store,
    systemClock,
    new CursorCodec(config.cursorSecret),
    config.retentionMonths,
  );
  return {
    organizations: new OrganizationService(store, systemClock, () => lifecycleLog.retentionCutoff()),
    lifecycleLog,
    webhookDeliveries: new WebhookDeliveryService(store, systemClock, {
      scheduleMs: config.webhookRetryScheduleMs,
      disableAfterMs: config.webhookDisableAfterMs,
      leaseMs: config.webhookLeaseMs,
      retentionMs: config.webhookDeliveryRetentionMs,
    }),
    /** Deletes idempotency records past their 24-hour window; returns how many. */
    pruneIdempotencyRecords: (batchSize: number) =>
      pruneExpiredIdempotencyRecords(idempotency, systemClock.now(), batchSize),
  };
}

export type CommandServices = ReturnType<typeof buildCommandServices>;

/** Applies pending migrations to DATABASE_URL; a missing database is reported with the command that creates it. */
export async function migrate(config: Config = loadConfig()): Promise<MigrationResult> {
  try {
    return await migrateDatabase(config.databaseUrl);
  } catch (error) {
    throw explainDatabaseError(error, config.databaseUrl);
  }
}

/** Migrates, opens DATABASE_URL, runs `work`, and closes the database. */
export async function withServices<T>(work: (services: CommandServices) => Promise<T>): Promise<T> {
  const config = loadConfig();
  await migrate(config);
  // Every statement of a command runs on the executor: Prisma's client is never loaded.
  const database = await openDatabase(config.databaseUrl, { prismaClient: false, sqliteReadThread: false });
  try {
    return await work(buildCommandServices(config, database));
  } finally {
    await database.close();
  }
}
