import { createHash, randomBytes } from "node:crypto";
import DataLoader from "dataloader";
import type { BudgetOverrides } from "../budgets/cost-budget.ts";
import { runInBackground } from "../shared/background-work.ts";
import type { Clock } from "../shared/clock.ts";
import { notFound, validationFailed, type FieldIssue } from "../shared/errors.ts";
import { isUuid, newId } from "../shared/ids.ts";
import type { Organization } from "../models.ts";
import type { Store } from "../store.ts";
import { CLI_CHANGE } from "../audit/audit-event.ts";
import type { AuditLogService } from "../audit/audit-log-service.ts";
import { API_KEY_SCOPES, orderedScopes, type ApiKeyScope } from "./api-key-scopes.ts";
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
  readonly name: string;
  readonly scopes: ReadonlySet<ApiKeyScope>;
  readonly expiresAt: Date | null;
  readonly lastUsedAt: Date | null;
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
  /** A label (default ""). */
  readonly name?: string;
  /** Default: every scope (the operator's keys, an organization's first key). */
  readonly scopes?: ReadonlySet<ApiKeyScope>;
  /** Default: never. */
  readonly expiresAt?: Date | null;
}

export interface Caller {
  readonly organizationId: string;
  readonly apiKeyId: string;
  /** The key's first characters, as listings and the audit log show it. */
  readonly apiKeyPrefix: string;
  /**
   * What the key may do (src/pipeline/access/scopes.ts says what each operation needs). Read with the key in the
   * authentication statement, so that checking it costs no statement.
   */
  readonly scopes: ReadonlySet<ApiKeyScope>;
  /**
   * The key runs registered (trusted) documents only: GraphQL text it sends is refused unless it is the text of
   * a document its organization registered (src/pipeline/trusted-documents/). REST is unaffected.
   */
  readonly trustedDocumentsOnly: boolean;
  /**
   * Everything a read of the organization's data depends on besides the request, taken when the caller was
   * authenticated, before the request read any data: the organization's data version, which the database raises
   * with every commit that changes its tags, references or lifecycle log (migration 0007), and its oldest event
   * still inside the retention window, which changes when the window (moving with the clock) passes it. A
   * response computed under one read version stays exact for as long as the read version does: the read cache's
   * key (src/pipeline/read-cache/).
   */
  readonly readVersion: string;
  /** The key's own cost budget, read with the key (null values: the server's defaults). */
  readonly budget?: BudgetOverrides;
}

/** Why a presented key is refused: it is unknown (or revoked), or it expired. */
export type KeyRefusal = "invalid" | "expired";

/** A key's use is written at most this often (`last_used_at`), never once per request. */
export const KEY_USE_RESOLUTION_MS = 60_000;
/** Keys whose recent use this instance remembers having written; older entries are dropped first. */
const MAX_REMEMBERED_KEY_USES = 10_000;

const ALL_SCOPES: ReadonlySet<ApiKeyScope> = new Set(API_KEY_SCOPES);

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
    /** Records the operator's key creations and revocations (the CLI's changes) in their transaction. */
    private readonly audit: AuditLogService,
  ) {}

  async createOrganization(name: string): Promise<{ organization: Organization; apiKey: IssuedApiKey }> {
    return this.store.transaction(async (store) => {
      const organization: Organization = { id: newId(), name: name.trim() || "default", createdAt: this.clock.now() };
      await store.organizations.insertOrganization(organization);
      // An organization's first key holds every scope (SPEC §3.1).
      const apiKey = await this.issueKey(store, organization.id, {});
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
      const issued = await this.issueKey(store, organizationId, { ...options, budget });
      await this.audit.record(store, CLI_CHANGE, {
        organizationId,
        action: "api_key.created",
        target: { type: "api_key", id: issued.id },
        changes: {
          prefix: { from: null, to: issued.record.keyPrefix },
          scopes: { from: null, to: orderedScopes(issued.record.scopes) },
          trusted_documents_only: { from: null, to: issued.record.trustedDocumentsOnly },
        },
      });
      return issued;
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

  /**
   * The operator's revocation (any organization's key), recorded as the CLI's change. At once: the next request
   * with that key is refused. @throws NOT_FOUND.
   */
  async revokeApiKey(keyId: string): Promise<void> {
    await this.store.transaction(async (store) => {
      const before = isUuid(keyId) ? await store.organizations.findApiKey(keyId.toLowerCase()) : null;
      if (!before) throw notFound("API key");
      if (before.revokedAt !== null) return;
      const key = await store.organizations.revokeApiKey(before.id, this.clock.now());
      await this.audit.record(store, CLI_CHANGE, {
        organizationId: before.organizationId,
        action: "api_key.revoked",
        target: { type: "api_key", id: before.id },
        changes: { revoked_at: { from: null, to: key?.revokedAt?.toISOString() ?? null } },
      });
    });
  }

  /** The caller behind a presented key, or null when the key is unknown, revoked or expired. */
  async authenticate(presentedKey: string): Promise<Caller | null> {
    const outcome = await this.authenticateOrRefuse(presentedKey);
    return typeof outcome === "string" ? null : outcome;
  }

  /**
   * The caller behind a presented key, or why it is refused. One statement (batched with the keys of the same
   * event-loop turn); the key's use is recorded in the background at most once a minute per key.
   */
  async authenticateOrRefuse(presentedKey: string): Promise<Caller | KeyRefusal> {
    if (!presentedKey.startsWith(KEY_PREFIX)) return "invalid";
    const key = await this.activeKeys.load(hashKey(presentedKey));
    if (!key) return "invalid";
    const now = this.clock.now();
    if (key.expiresAt !== null && key.expiresAt.getTime() <= now.getTime()) return "expired";
    this.noteKeyUse(key, now);
    const oldestVisibleEvent = key.oldestVisibleEventAt?.getTime() ?? "none";
    return {
      organizationId: key.organizationId,
      apiKeyId: key.id,
      apiKeyPrefix: key.keyPrefix,
      scopes: key.scopes,
      trustedDocumentsOnly: key.trustedDocumentsOnly,
      readVersion: `${key.dataVersion}/${oldestVisibleEvent}`,
      budget: key.budget,
    };
  }

  /** When this instance last wrote each key's use (bounded: a forgotten key is at worst written once more). */
  private readonly keyUseWritten = new Map<string, number>();

  /**
   * Records a key's use, at most once a minute per key: skipped while the stored `last_used_at` (read with the key)
   * or this instance's own last write is younger than a minute. The write is conditional, so that instances racing
   * on the same minute store it once, and it runs after the request's own statement: a failure is only logged away.
   */
  private noteKeyUse(key: AuthenticatedApiKey, now: Date): void {
    const notBefore = now.getTime() - KEY_USE_RESOLUTION_MS;
    if (key.lastUsedAt !== null && key.lastUsedAt.getTime() > notBefore) return;
    const written = this.keyUseWritten.get(key.id);
    if (written !== undefined && written > notBefore) return;
    if (this.keyUseWritten.size >= MAX_REMEMBERED_KEY_USES) {
      const oldest = this.keyUseWritten.keys().next().value;
      if (oldest !== undefined) this.keyUseWritten.delete(oldest);
    }
    this.keyUseWritten.delete(key.id);
    this.keyUseWritten.set(key.id, now.getTime());
    this.store.organizations.recordApiKeyUse(key.id, now, new Date(notBefore)).catch(() => {
      // A lost use time is harmless: the next minute writes it. It is not tried again sooner: while the database
      // refuses writes (SQLite's write lock held elsewhere waits out its busy timeout on every try), retrying on
      // each request would stall every request behind a write nobody asked for.
    });
  }

  /**
   * Writes a new key inside `store`'s transaction and returns it with the key itself (shown once). Options are
   * taken as checked: the callers validate them.
   */
  async issueKey(
    store: Store,
    organizationId: string,
    options: Omit<ApiKeyOptions, "budget"> & { readonly budget?: BudgetOverrides },
  ): Promise<IssuedApiKey & { readonly record: ApiKeyRecord }> {
    const key = KEY_PREFIX + randomBytes(32).toString("base64url");
    const record: ApiKeyRecord = {
      id: newId(),
      organizationId,
      keyHash: hashKey(key),
      keyPrefix: key.slice(0, 8),
      createdAt: this.clock.now(),
      revokedAt: null,
      trustedDocumentsOnly: options.trustedDocumentsOnly ?? false,
      budget: options.budget ?? { maximum: null, restoreRate: null },
      name: options.name ?? "",
      scopes: options.scopes ?? ALL_SCOPES,
      expiresAt: options.expiresAt ?? null,
      lastUsedAt: null,
    };
    await store.organizations.insertApiKey(record);
    return { id: record.id, organizationId, key, record };
  }
}

export function summaryOf(key: ApiKeyRecord): ApiKeySummary {
  const { id, organizationId, keyPrefix, createdAt, revokedAt, trustedDocumentsOnly, budget } = key;
  const { name, scopes, expiresAt, lastUsedAt } = key;
  return {
    id,
    organizationId,
    keyPrefix,
    createdAt,
    revokedAt,
    trustedDocumentsOnly,
    budget,
    name,
    scopes,
    expiresAt,
    lastUsedAt,
  };
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
