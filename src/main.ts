import type { AddressInfo } from "node:net";
import { buildApp } from "./app.ts";
import { ConfigError, loadConfig, loadWebhookSecretKey } from "./config.ts";
import { openDatabase } from "./store/database.ts";
import { DatabaseSetupError, explainDatabaseError } from "./store/database-hints.ts";
import { announceStart } from "./start-screen.ts";
import { migrateDatabase } from "./store/prisma/migration-runner.ts";

/** Reads config, migrates, builds the app, listens, and shuts down gracefully on SIGTERM / SIGINT. */
async function main(): Promise<void> {
  const config = loadConfig();
  loadWebhookSecretKey(config); // before migrating: production without a key refuses to start at once
  const migrations = await migrateDatabase(config.databaseUrl).catch((error: unknown) => {
    throw explainDatabaseError(error, config.databaseUrl);
  });
  // Every statement of the server runs on the executor: Prisma's client is never loaded.
  const database = await openDatabase(config.databaseUrl, {
    prismaClient: false,
    sqliteReadThread: config.sqliteReadThread,
  });
  const app = await buildApp({ config, database });
  const log = app.http.log;
  log.info({ applied: migrations.applied, provider: database.provider }, "database migrated");

  if (config.isProduction) {
    // A production server never creates an organization by itself: say how to create the first one.
    if (!(await app.services.organizations.hasOrganizations())) {
      log.warn(
        "no organization exists yet, so no API key can authenticate: create one with `node bin/reftrail.mjs org create <name>` (it prints the first API key)",
      );
    }
  } else {
    const created = await app.services.organizations.ensureDefaultOrganization();
    if (created) {
      // Printed once, on the first start of an empty database: the key is stored only as a hash.
      process.stdout.write(
        [
          "",
          "==================== reftrail: default organization created ====================",
          `  organization_id: ${created.organization.id}`,
          `  API key (shown once, store it now): ${created.apiKey.key}`,
          `  try: curl -H "X-API-Key: ${created.apiKey.key}" http://localhost:${config.port}/v1/tags`,
          "================================================================================",
          "",
        ].join("\n"),
      );
    }
  }

  let shuttingDown = false;
  const shutdown = async (signal: string) => {
    if (shuttingDown) return;
    shuttingDown = true;
    log.info({ signal }, "shutting down: no new connections, finishing in-flight requests");
    const forced = setTimeout(() => {
      log.error("graceful shutdown took more than 25 s; exiting");
      process.exit(1);
    }, 25_000);
    forced.unref();
    try {
      await app.close();
      log.info("shutdown complete");
      process.exit(0);
    } catch (error) {
      log.error({ err: error }, "error during shutdown");
      process.exit(1);
    }
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));

  await app.http.listen({ host: config.host, port: config.port });
  announceStart(app.http.server.address() as AddressInfo, config.logFormat, log);
}

main().catch((error: unknown) => {
  // Problems the operator fixes with one setting or one command get one line; anything else its stack trace.
  if (error instanceof ConfigError || error instanceof DatabaseSetupError) {
    console.error(`reftrail failed to start: ${error.message}`);
  } else {
    console.error("reftrail failed to start:", error);
  }
  process.exit(1);
});
