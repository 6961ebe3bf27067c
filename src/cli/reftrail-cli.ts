import { readFileSync } from "node:fs";
import { Command } from "commander";
import type { CommandServices } from "../build-services.ts";

/*
 * The `reftrail` administrative command. Each subcommand reads DATABASE_URL like the server, applies
 * pending migrations first (so it works on a fresh database), prints JSON to stdout and exits non-zero on error.
 * The services come from the composition root (src/build-services.ts), loaded only when a command needs them, so
 * that `--help` and `--version` answer at once.
 */

const PACKAGE_VERSION = (
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
).version;

async function withServices<T>(work: (services: CommandServices) => Promise<T>): Promise<T> {
  const { withCommandServices } = await import("../build-services.ts");
  return withCommandServices(work);
}

const print = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);

export function buildCli(): Command {
  const program = new Command("reftrail")
    .description("reftrail administration")
    .version(PACKAGE_VERSION)
    .showHelpAfterError();

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
  org
    .command("list")
    .description('list organizations, oldest first; prints {"organizations":[...]}')
    .action(() =>
      withServices(async (services) => {
        const organizations = await services.organizations.listOrganizations();
        print({
          organizations: organizations.map((organization) => ({
            organization_id: organization.id,
            name: organization.name,
            created_at: organization.createdAt.toISOString(),
          })),
        });
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
    .command("list <organization_id>")
    .description("list an organization's API keys, revoked ones included (prefixes only, never the keys)")
    .action((organizationId: string) =>
      withServices(async (services) => {
        const keys = await services.organizations.listApiKeys(organizationId);
        print({
          organization_id: organizationId,
          api_keys: keys.map((apiKey) => ({
            api_key_id: apiKey.id,
            key_prefix: apiKey.keyPrefix,
            created_at: apiKey.createdAt.toISOString(),
            revoked_at: apiKey.revokedAt?.toISOString() ?? null,
          })),
        });
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
      const { migrate } = await import("../build-services.ts");
      const result = await migrate();
      print({ applied: result.applied, already_applied: result.alreadyApplied });
    });

  program
    .command("prune")
    .description(
      "delete lifecycle events, succeeded webhook deliveries and idempotency records past their retention, in batches",
    )
    .option("--batch-size <n>", "rows per batch (SQLite: a batch holds the write lock; 200 keeps it near 50 ms)", "200")
    .action((options: { batchSize: string }) =>
      withServices(async (services) => {
        const deleted = await services.lifecycleLog.pruneExpiredEvents(Number(options.batchSize));
        const deliveries = await services.webhookDeliveries.pruneSucceededDeliveries(Number(options.batchSize));
        const records = await services.pruneIdempotencyRecords(Number(options.batchSize));
        print({
          deleted,
          cutoff: services.lifecycleLog.retentionCutoff().toISOString(),
          deleted_webhook_deliveries: deliveries,
          webhook_delivery_cutoff: services.webhookDeliveries.retentionCutoff().toISOString(),
          deleted_idempotency_records: records,
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
