import type { BudgetOverrides } from "../budgets/cost-budget.ts";
import type { Organization } from "../models.ts";
import type { ApiKeyScope } from "./api-key-scopes.ts";

/*
 * What organizations and their API keys need from persistence, implemented in
 * src/store/sql/organization-repository.ts. Reached as `store.organizations` of a `Store`: inside
 * `store.transaction` it writes in that transaction.
 */

export interface ApiKeyRecord {
  readonly id: string;
  readonly organizationId: string;
  readonly keyHash: string;
  readonly keyPrefix: string;
  readonly createdAt: Date;
  readonly revokedAt: Date | null;
  /** GraphQL requests with this key run registered (trusted) documents only; REST is unaffected. */
  readonly trustedDocumentsOnly: boolean;
  /** The key's own cost budget; each value null where the server's default applies. */
  readonly budget: BudgetOverrides;
  /** A label its organization gave it ("" for keys made by the CLI). */
  readonly name: string;
  readonly scopes: ReadonlySet<ApiKeyScope>;
  /** Past this time the key is refused (401, saying it expired); null: never. */
  readonly expiresAt: Date | null;
  /** When the key was last used, to the minute (written at most once a minute). */
  readonly lastUsedAt: Date | null;
}

/** An API key that is not revoked, with what its organization's reads depend on (see `Caller.readVersion`). */
export interface AuthenticatedApiKey {
  readonly id: string;
  readonly keyHash: string;
  readonly organizationId: string;
  readonly trustedDocumentsOnly: boolean;
  /** The organization's data version, raised by the database with every commit that changes its data. */
  readonly dataVersion: number;
  /** When the organization's oldest lifecycle event at or after the given retention cutoff occurred; null if none. */
  readonly oldestVisibleEventAt: Date | null;
  /** The key's own cost budget (null values: the server's defaults). */
  readonly budget: BudgetOverrides;
  readonly keyPrefix: string;
  readonly scopes: ReadonlySet<ApiKeyScope>;
  readonly expiresAt: Date | null;
  readonly lastUsedAt: Date | null;
}

export interface OrganizationRepository {
  insertOrganization(organization: Organization): Promise<void>;
  countOrganizations(): Promise<number>;
  findOrganization(id: string): Promise<Organization | null>;
  /** Every organization, oldest first (administration only: the CLI). */
  listOrganizations(): Promise<Organization[]>;
  /** The organization's keys, revoked ones included, oldest first. */
  listApiKeys(organizationId: string): Promise<ApiKeyRecord[]>;
  /**
   * Holds the organization until the transaction ends: other transactions that lock it wait, so that a count of
   * its tags taken after the lock stays true until commit (the per-organization tag limit). Only inside
   * `transaction`. Lock order, to avoid deadlocks: a reference before its organization.
   */
  lockOrganization(organizationId: string): Promise<void>;
  insertApiKey(key: ApiKeyRecord): Promise<void>;
  /** One key, revoked or not; null when there is none with that id. */
  findApiKey(id: string): Promise<ApiKeyRecord | null>;
  /**
   * The keys among these hashes that are not revoked, with what their organizations' reads depend on, read in one
   * statement: every authenticated request starts here, before it reads any data. Unknown and revoked keys are
   * absent from the result.
   */
  findActiveApiKeysByHash(keyHashes: readonly string[], retentionCutoff: Date): Promise<AuthenticatedApiKey[]>;
  revokeApiKey(id: string, at: Date): Promise<ApiKeyRecord | null>;
  /**
   * Records the key's use at `at` unless a use after `notBefore` is already recorded: one conditional statement,
   * so that instances racing to record the same minute write once between them.
   */
  recordApiKeyUse(id: string, at: Date, notBefore: Date): Promise<void>;
  /** Marks a key trusted-documents-only, or not; returns it as it is now, or null for an unknown key. */
  updateTrustedDocumentsOnly(id: string, trustedDocumentsOnly: boolean): Promise<ApiKeyRecord | null>;
  /** Sets the key's own cost budget (a null value: the server's default again); null when there is no such key. */
  updateApiKeyBudget(id: string, budget: BudgetOverrides): Promise<ApiKeyRecord | null>;
}
