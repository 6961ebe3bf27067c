import { buildApp } from "./app.ts";
import { ConfigError, loadConfig, loadWebhookSecretKey } from "./config.ts";
import { openDatabase } from "./store/database.ts";
import { migrateDatabase } from "./store/migrations.ts";

/** Reads config, migrates, builds the app, listens, and shuts down gracefully on SIGTERM / SIGINT. */
async function main(): Promise<void> {
  const config = loadConfig();
  loadWebhookSecretKey(config); // before migrating: production without a key refuses to start at once
  const migrations = await migrateDatabase(config.databaseUrl);
  const database = await openDatabase(config.databaseUrl);
  const app = await buildApp({ config, database });
  const log = app.http.log;
  log.info({ applied: migrations.applied, provider: database.provider }, "database migrated");

  if (!config.isProduction) {
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
}

main().catch((error: unknown) => {
  // A configuration mistake is the operator's to fix: one line that says how, not a stack trace.
  if (error instanceof ConfigError) console.error(`reftrail failed to start: ${error.message}`);
  else console.error("reftrail failed to start:", error);
  process.exit(1);
});
