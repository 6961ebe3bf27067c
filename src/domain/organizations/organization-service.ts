import { createHash, randomBytes } from "node:crypto";
import DataLoader from "dataloader";
import type { BudgetOverrides } from "../budgets/cost-budget.ts";
import { runInBackground } from "../shared/background-work.ts";
import type { Clock } from "../shared/clock.ts";
import { notFound, validationFailed, type FieldIssue } from "../shared/errors.ts";
import { isUuid, newId } from "../shared/ids.ts";
import type { Organization } from "../models.ts";
import type { Store } from "../store.ts";
import type { ApiKeyRecord, AuthenticatedApiKey } from "./organization-repository.ts";

export interface IssuedApiKey {
  readonly id: string;
  readonly organizationId: string;
  /** The key itself: shown once, never stored. */
  readonly key: string;
}

/** An API key as an administrator lists it: never the key itself nor its hash. */
export interface ApiKeySummary {
  readonly id: string;
  readonly organizationId: string;
  /** The key's first characters (`rt_` and 5 more), enough to recognize it, too few to use it. */
  readonly keyPrefix: string;
  readonly createdAt: Date;
  readonly revokedAt: Date | null;
  /** GraphQL requests with this key run registered (trusted) documents only (src/domain/documents/). */
  readonly trustedDocumentsOnly: boolean;
  /** The key's own cost budget; each value null where the server's default applies. */
  readonly budget: BudgetOverrides;
}

/** Changes to a key's own cost budget: a number sets it, null gives the server's default back, absent keeps it. */
export interface ApiKeyBudgetChange {
  readonly maximum?: number | null;
  readonly restoreRate?: number | null;
}

/** What may be set on a key as it is issued. */
export interface ApiKeyOptions {
  /** GraphQL requests with the key run registered documents only (default false). */
  readonly trustedDocumentsOnly?: boolean;
  /** The key's own cost budget (default: the server's). */
  readonly budget?: ApiKeyBudgetChange;
}

export interface Caller {
  readonly organizationId: string;
  readonly apiKeyId: string;
  /**
   * The key runs registered (trusted) documents only: GraphQL text it sends is refused unless it is the text of
   * a document its organization registered (src/trusted-documents/). REST is unaffected.
   */
  readonly trustedDocumentsOnly: boolean;
  /**
   * Everything a read of the organization's data depends on besides the request, taken when the caller was
   * authenticated, before the request read any data: the organization's data version, which the database raises
   * with every commit that changes its tags, references or lifecycle log (migration 0007), and its oldest event
   * still inside the retention window, which changes when the window (moving with the clock) passes it. A
   * response computed under one read version stays exact for as long as the read version does: the read cache's
   * key (src/read-cache/).
   */
  readonly readVersion: string;
  /** The key's own cost budget, read with the key (null values: the server's defaults). */
  readonly budget?: BudgetOverrides;
}

const KEY_PREFIX = "rt_";
/** Requests authenticated by one statement at most (a bound on its IN list). */
const MAX_KEYS_PER_LOOKUP = 64;

function hashKey(key: string): string {
  return createHash("sha256").update(key).digest("hex");
}

/**
 * Organizations and their API keys. Keys are 32 random bytes, stored only as a SHA-256 hash (a
 * slow password hash buys nothing for 256-bit random secrets and would cost every request).
 */
export class OrganizationService {
  /**
   * Keys presented in one event-loop turn are looked up together, in one statement (with 50 busy connections,
   * one round trip to PostgreSQL for several requests instead of one each). The batch is sent in the turn's check
   * phase (`setImmediate`), after every request that arrived in the turn has asked, and never remembered
   * (`cache: false`): each request still reads the key and its organization's version after it arrived, which is
   * what keeps a revoked key refused at once and the read cache exact. The batch is no single request's: it runs
   * in the background (background-work.ts), its statement a trace of its own when traces are on.
   */
  private readonly activeKeys = new DataLoader<string, AuthenticatedApiKey | null>(
    async (keyHashes) => {
      const found = await this.store.organizations.findActiveApiKeysByHash(
        [...new Set(keyHashes)],
        this.retentionCutoff(),
      );
      const byHash = new Map(found.map((key) => [key.keyHash, key]));
      return keyHashes.map((keyHash) => byHash.get(keyHash) ?? null);
    },
    {
      cache: false,
      batchScheduleFn: (dispatch) => runInBackground(() => setImmediate(dispatch)),
      maxBatchSize: MAX_KEYS_PER_LOOKUP,
    },
  );

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    /** The lifecycle log's retention cutoff (LifecycleLogService): what a caller's reads can see moves with it. */
    private readonly retentionCutoff: () => Date,
  ) {}

  async createOrganization(name: string): Promise<{ organization: Organization; apiKey: IssuedApiKey }> {
    return this.store.transaction(async (store) => {
      const organization: Organization = { id: newId(), name: name.trim() || "default", createdAt: this.clock.now() };
      await store.organizations.insertOrganization(organization);
      const apiKey = await this.issueKey(store, organization.id);
      return { organization, apiKey };
    });
  }

  /** Creates the default organization when the database has none; returns its key, or null. */
  async ensureDefaultOrganization(): Promise<{ organization: Organization; apiKey: IssuedApiKey } | null> {
    if ((await this.store.organizations.countOrganizations()) > 0) return null;
    return this.createOrganization("default");
  }

  /** Whether any organization exists (a production server starts without creating one). */
  async hasOrganizations(): Promise<boolean> {
    return (await this.store.organizations.countOrganizations()) > 0;
  }

  /** Every organization, oldest first. */
  listOrganizations(): Promise<Organization[]> {
    return this.store.organizations.listOrganizations();
  }

  /** The organization's keys, revoked ones included, oldest first; no secrets. @throws NOT_FOUND. */
  async listApiKeys(organizationId: string): Promise<ApiKeySummary[]> {
    if (!isUuid(organizationId) || !(await this.store.organizations.findOrganization(organizationId)))
      throw notFound("organization");
    const keys = await this.store.organizations.listApiKeys(organizationId);
    return keys.map(summaryOf);
  }

  /**
   * Issues a key, trusted-documents-only and with its own cost budget where `options` say so.
   * @throws NOT_FOUND for an unknown organization; VALIDATION_FAILED for a budget value that is not a positive number.
   */
  async createApiKey(organizationId: string, options: ApiKeyOptions = {}): Promise<IssuedApiKey> {
    const budget = checkedBudget(options.budget ?? {}, { maximum: null, restoreRate: null });
    return this.store.transaction(async (store) => {
      if (!isUuid(organizationId) || !(await store.organizations.findOrganization(organizationId)))
        throw notFound("organization");
      return this.issueKey(store, organizationId, options.trustedDocumentsOnly ?? false, budget);
    });
  }

  /**
   * Sets a key's own cost budget (docs/decisions.md, "Cost budgets"): every instance applies it from the key's
   * next request on. Returns the key as listed.
   * @throws NOT_FOUND for an unknown key; VALIDATION_FAILED for a value that is not a positive number.
   */
  async updateApiKeyBudget(keyId: string, change: ApiKeyBudgetChange): Promise<ApiKeySummary> {
    return this.store.transaction(async (store) => {
      const current = isUuid(keyId) ? await store.organizations.findApiKey(keyId) : null;
      if (!current) throw notFound("API key");
      const updated = await store.organizations.updateApiKeyBudget(keyId, checkedBudget(change, current.budget));
      if (!updated) throw notFound("API key");
      return summaryOf(updated);
    });
  }

  /**
   * Marks a key trusted-documents-only (GraphQL runs registered documents only), or lifts the mark. Takes effect
   * with the key's next request (every request reads its key afresh). @throws NOT_FOUND.
   */
  async setTrustedDocumentsOnly(keyId: string, trustedDocumentsOnly: boolean): Promise<ApiKeySummary> {
    const key = isUuid(keyId)
      ? await this.store.organizations.updateTrustedDocumentsOnly(keyId, trustedDocumentsOnly)
      : null;
    if (!key) throw notFound("API key");
    return summaryOf(key);
  }

  /** Revokes at once: the next request with that key is refused. @throws NOT_FOUND. */
  async revokeApiKey(keyId: string): Promise<void> {
    const key = isUuid(keyId) ? await this.store.organizations.revokeApiKey(keyId, this.clock.now()) : null;
    if (!key) throw notFound("API key");
  }

  /** The caller behind a presented key, or null when the key is unknown or revoked. */
  async authenticate(presentedKey: string): Promise<Caller | null> {
    if (!presentedKey.startsWith(KEY_PREFIX)) return null;
    const key = await this.activeKeys.load(hashKey(presentedKey));
    if (!key) return null;
    const oldestVisibleEvent = key.oldestVisibleEventAt?.getTime() ?? "none";
    return {
      organizationId: key.organizationId,
      apiKeyId: key.id,
      trustedDocumentsOnly: key.trustedDocumentsOnly,
      readVersion: `${key.dataVersion}/${oldestVisibleEvent}`,
      budget: key.budget,
    };
  }

  private async issueKey(
    store: Store,
    organizationId: string,
    trustedDocumentsOnly = false,
    budget: BudgetOverrides = { maximum: null, restoreRate: null },
  ): Promise<IssuedApiKey> {
    const key = KEY_PREFIX + randomBytes(32).toString("base64url");
    const id = newId();
    await store.organizations.insertApiKey({
      id,
      organizationId,
      keyHash: hashKey(key),
      keyPrefix: key.slice(0, 8),
      createdAt: this.clock.now(),
      revokedAt: null,
      trustedDocumentsOnly,
      budget,
    });
    return { id, organizationId, key };
  }
}

function summaryOf(key: ApiKeyRecord): ApiKeySummary {
  const { id, organizationId, keyPrefix, createdAt, revokedAt, trustedDocumentsOnly, budget } = key;
  return { id, organizationId, keyPrefix, createdAt, revokedAt, trustedDocumentsOnly, budget };
}

/** `change` applied to `current`, each value checked: a finite number above 0, or null (the server's default). */
function checkedBudget(change: ApiKeyBudgetChange, current: BudgetOverrides): BudgetOverrides {
  const issues: FieldIssue[] = [];
  const check = (field: "maximum" | "restoreRate"): number | null => {
    const value = change[field];
    if (value === undefined) return current[field];
    if (value === null) return null;
    if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) {
      issues.push({ path: [field], code: "INVALID_BUDGET", message: `{${field}} must be a number above 0` });
    }
    return value;
  };
  const budget = { maximum: check("maximum"), restoreRate: check("restoreRate") };
  if (issues.length > 0) throw validationFailed(issues);
  return budget;
}
