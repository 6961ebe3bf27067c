import { Command } from "commander";
import { buildServices } from "../app.ts";
import { loadConfig } from "../config.ts";
import type { Services } from "../domain/services.ts";
import { openDatabase } from "../store/database.ts";
import { migrateDatabase } from "../store/migrations.ts";

/*
 * The `reftrail` administrative command (SPEC §2). Each subcommand reads DATABASE_URL like the server, applies
 * pending migrations first (so it works on a fresh database), prints JSON to stdout and exits non-zero on error.
 */

async function withServices<T>(work: (services: Services) => Promise<T>): Promise<T> {
  const config = loadConfig();
  await migrateDatabase(config.databaseUrl);
  const database = await openDatabase(config.databaseUrl);
  try {
    return await work(buildServices(config, database));
  } finally {
    await database.close();
  }
}

const print = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

export function buildCli(): Command {
  const program = new Command("reftrail").description("reftrail administration").showHelpAfterError();

  const org = program.command("org").description("organizations");
  org
    .command("create <name>")
    .description('create an organization and its first API key; prints {"organization_id","api_key"}')
    .action((name: string) =>
      withServices(async (services) => {
        const { organization, apiKey } = await services.organizations.createOrganization(name);
        print({ organization_id: organization.id, api_key: apiKey.key, api_key_id: apiKey.id });
      }),
    );

  const key = program.command("key").description("API keys");
  key
    .command("create <organization_id>")
    .description("issue another API key for an organization (shown once)")
    .action((organizationId: string) =>
      withServices(async (services) => {
        const issued = await services.organizations.createApiKey(organizationId);
        print({ organization_id: issued.organizationId, api_key: issued.key, api_key_id: issued.id });
      }),
    );
  key
    .command("revoke <key_id>")
    .description("revoke an API key; it stops working at once")
    .action((keyId: string) =>
      withServices(async (services) => {
        await services.organizations.revokeApiKey(keyId);
        print({ api_key_id: keyId, revoked: true });
      }),
    );

  program
    .command("migrate")
    .description("apply pending database migrations")
    .action(async () => {
      const result = await migrateDatabase(loadConfig().databaseUrl);
      print({ applied: result.applied, already_applied: result.alreadyApplied });
    });

  program
    .command("prune")
    .description("delete lifecycle events and succeeded webhook deliveries past their retention, in batches")
    .option("--batch-size <n>", "rows per batch", "1000")
    .action((options: { batchSize: string }) =>
      withServices(async (services) => {
        const deleted = await services.lifecycleLog.pruneExpiredEvents(Number(options.batchSize));
        const deliveries = await services.webhookDeliveries.pruneSucceededDeliveries(Number(options.batchSize));
        print({
          deleted,
          cutoff: services.lifecycleLog.retentionCutoff().toISOString(),
          deleted_webhook_deliveries: deliveries,
          webhook_delivery_cutoff: services.webhookDeliveries.retentionCutoff().toISOString(),
        });
      }),
    );

  return program;
}

export async function runCli(argv: readonly string[]): Promise<void> {
  try {
    await buildCli().parseAsync([...argv]);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(`reftrail: ${message}\n`);
    process.exitCode = 1;
  }
}
