import { API_KEY_SCOPES, isApiKeyScope } from "../domain/organizations/api-key-scopes.ts";
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

/** `--budget-maximum` / `--budget-restore-rate`: a number, or `default` for the server's setting again. */
interface BudgetOptions {
  readonly budgetMaximum?: string;
  readonly budgetRestoreRate?: string;
}

function budgetValue(text: string | undefined, option: string): number | null | undefined {
  if (text === undefined) return undefined;
  if (text.trim().toLowerCase() === "default") return null;
  const value = Number(text);
  if (text.trim() === "" || !Number.isFinite(value) || value <= 0) {
    throw new Error(`${option}: "${text}" is not a number above 0 (or "default")`);
  }
  return value;
}

function budgetChange(options: BudgetOptions) {
  const maximum = budgetValue(options.budgetMaximum, "--budget-maximum");
  const restoreRate = budgetValue(options.budgetRestoreRate, "--budget-restore-rate");
  return {
    ...(maximum !== undefined ? { maximum } : {}),
    ...(restoreRate !== undefined ? { restoreRate } : {}),
  };
}

/** A key's budget as the command prints it: null where the server's setting applies. */
const printedBudget = (budget: { maximum: number | null; restoreRate: number | null }) => ({
  budget_maximum: budget.maximum,
  budget_restore_rate: budget.restoreRate,
});

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
    .option("--trusted-documents-only", "the key runs registered GraphQL documents only (see `documents register`)")
    .option("--budget-maximum <n>", "the key's own cost budget: what its bucket holds at most")
    .option("--budget-restore-rate <r>", "the key's own cost budget: cost units restored per second")
    .option("--scopes <list>", "comma-separated scopes (default: every scope), e.g. references:read,webhooks:read")
    .option("--name <name>", "a label the organization sees in its key listing")
    .action(
      (
        organizationId: string,
        options: BudgetOptions & { trustedDocumentsOnly?: boolean; scopes?: string; name?: string },
      ) =>
        withServices(async (services) => {
          const scopes = options.scopes?.split(",").map((scope) => scope.trim());
          const unknown = scopes?.filter((scope) => !isApiKeyScope(scope)) ?? [];
          if (unknown.length > 0 || scopes?.length === 0)
            throw new Error(`--scopes takes scopes among ${API_KEY_SCOPES.join(", ")}; unknown: ${unknown.join(", ")}`);
          const issued = await services.organizations.createApiKey(organizationId, {
            trustedDocumentsOnly: options.trustedDocumentsOnly === true,
            budget: budgetChange(options),
            ...(scopes && { scopes: new Set(scopes.filter(isApiKeyScope)) }),
            ...(options.name !== undefined && { name: options.name.trim() }),
          });
          print({ organization_id: issued.organizationId, api_key: issued.key, api_key_id: issued.id });
        }),
    );
  key
    .command("trusted-documents-only <key_id>")
    .description("mark an API key trusted-documents-only (GraphQL runs registered documents only); --off lifts it")
    .option("--off", "lift the mark: the key may send any GraphQL document again")
    .action((keyId: string, options: { off?: boolean }) =>
      withServices(async (services) => {
        const updated = await services.organizations.setTrustedDocumentsOnly(keyId, options.off !== true);
        print({ api_key_id: updated.id, trusted_documents_only: updated.trustedDocumentsOnly });
      }),
    );
  key
    .command("update <key_id>")
    .description("set an API key's own cost budget (a number, or `default` for the server's setting)")
    .option("--budget-maximum <n>", "what the key's bucket holds at most")
    .option("--budget-restore-rate <r>", "cost units the key's bucket restores per second")
    .action((keyId: string, options: BudgetOptions) =>
      withServices(async (services) => {
        const updated = await services.organizations.updateApiKeyBudget(keyId, budgetChange(options));
        print({ api_key_id: updated.id, organization_id: updated.organizationId, ...printedBudget(updated.budget) });
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
            // Only on a marked key: the listing of ordinary keys keeps the fields scripts already read.
            ...(apiKey.trustedDocumentsOnly ? { trusted_documents_only: true } : {}),
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

  const documents = program.command("documents").description("trusted GraphQL documents");
  documents
    .command("register <organization_id> <file>")
    .description(
      "register the documents of a manifest (GraphQL Code Generator's persisted-documents.json: an object from " +
        "sha256 hash to document text) for an organization; idempotent",
    )
    .action((organizationId: string, file: string) =>
      withServices(async (services) => {
        const manifest: unknown = JSON.parse(readFileSync(file, "utf8"));
        const result = await services.trustedDocuments.registerDocuments(
          { organizationId, trustedDocumentsOnly: false },
          manifest,
        );
        print({
          organization_id: organizationId,
          registered: result.registered,
          already_registered: result.documents.length - result.registered,
          documents: result.documents.map((document) => ({
            document_id: document.documentId,
            operation_names: document.operationNames,
            created_at: document.createdAt.toISOString(),
          })),
        });
      }),
    );
  documents
    .command("list <organization_id>")
    .description('list an organization\'s registered documents, oldest first; prints {"documents":[...],"next_cursor"}')
    .option("--limit <n>", "documents per page (1-500)", "100")
    .option("--cursor <cursor>", "the next_cursor of the previous page")
    .action((organizationId: string, options: { limit: string; cursor?: string }) =>
      withServices(async (services) => {
        const page = await services.trustedDocuments.listDocuments(organizationId, {
          limit: Math.min(500, Math.max(1, Number(options.limit) || 100)),
          cursor: options.cursor,
        });
        print({
          organization_id: organizationId,
          documents: page.items.map((document) => ({
            document_id: document.documentId,
            operation_names: document.operationNames,
            created_at: document.createdAt.toISOString(),
            document: document.document,
          })),
          next_cursor: page.nextCursor,
        });
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
      "delete lifecycle events, succeeded webhook deliveries, idempotency records and audit events (400 days) past their retention, in batches",
    )
    .option("--batch-size <n>", "rows per batch (SQLite: a batch holds the write lock; 200 keeps it near 50 ms)", "200")
    .action((options: { batchSize: string }) =>
      withServices(async (services) => {
        const deleted = await services.lifecycleLog.pruneExpiredEvents(Number(options.batchSize));
        const deliveries = await services.webhookDeliveries.pruneSucceededDeliveries(Number(options.batchSize));
        const records = await services.pruneIdempotencyRecords(Number(options.batchSize));
        const auditEvents = await services.audit.pruneExpired();
        print({
          deleted,
          cutoff: services.lifecycleLog.retentionCutoff().toISOString(),
          deleted_webhook_deliveries: deliveries,
          webhook_delivery_cutoff: services.webhookDeliveries.retentionCutoff().toISOString(),
          deleted_idempotency_records: records,
          deleted_audit_events: auditEvents,
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
