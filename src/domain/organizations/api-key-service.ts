import type { AuditLogService } from "../audit/audit-log-service.ts";
import type { ChangeContext } from "../audit/audit-event.ts";
import type { Clock } from "../shared/clock.ts";
import { parseDateTime } from "../shared/date-time.ts";
import { forbiddenScope, notFound, validationFailed, type FieldIssue } from "../shared/errors.ts";
import { isUuid } from "../shared/ids.ts";
import type { Store } from "../store.ts";
import { isApiKeyScope, orderedScopes, type ApiKeyScope } from "./api-key-scopes.ts";
import { summaryOf, type ApiKeySummary, type Caller, type OrganizationService } from "./organization-service.ts";

/** A key as its organization asks for it (REST body, GraphQL input), before validation. */
export interface CreateApiKeyInput {
  readonly name: unknown;
  readonly scopes: unknown;
  readonly expiresAt?: unknown;
  readonly trustedDocumentsOnly?: unknown;
}

/** A key just created: what is listed of it, and the key itself, shown this once. */
export interface CreatedApiKey {
  readonly apiKey: ApiKeySummary;
  readonly key: string;
}

export const MAX_API_KEY_NAME_LENGTH = 100;

/**
 * API keys as their organization manages them (SPEC §3.1): create, list, read, revoke. The operator's CLI keeps
 * its own commands (OrganizationService). Every change is written with its audit event in one transaction.
 */
export class ApiKeyService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly organizations: OrganizationService,
    private readonly audit: AuditLogService,
  ) {}

  /**
   * Creates a key holding only scopes the creating key holds itself.
   * @throws VALIDATION_FAILED (name, scopes, an `expiresAt` that is not a date or not in the future);
   *         FORBIDDEN naming the first scope the creator lacks.
   */
  async createApiKey(caller: Caller, change: ChangeContext, input: CreateApiKeyInput): Promise<CreatedApiKey> {
    const issues: FieldIssue[] = [];
    const name = typeof input.name === "string" ? input.name.trim() : "";
    if (name.length === 0 || name.length > MAX_API_KEY_NAME_LENGTH)
      issues.push({
        path: ["name"],
        code: "INVALID_NAME",
        message: `{name} must be 1-${MAX_API_KEY_NAME_LENGTH} characters`,
      });
    const scopes = new Set<ApiKeyScope>();
    if (!Array.isArray(input.scopes) || input.scopes.length === 0) {
      issues.push({ path: ["scopes"], code: "INVALID_SCOPES", message: "{scopes} must list at least one scope" });
    } else {
      input.scopes.forEach((scope: unknown, index) => {
        if (typeof scope === "string" && isApiKeyScope(scope)) scopes.add(scope);
        else issues.push({ path: ["scopes", index], code: "UNKNOWN_SCOPE", message: "not a known scope" });
      });
    }
    let expiresAt: Date | null = null;
    if (input.expiresAt !== undefined && input.expiresAt !== null) {
      expiresAt = input.expiresAt instanceof Date ? input.expiresAt : parseDateTime(input.expiresAt);
      if (!expiresAt)
        issues.push({
          path: ["expiresAt"],
          code: "INVALID_DATE_TIME",
          message: "{expiresAt} must be an ISO 8601 time",
        });
      else if (expiresAt.getTime() <= this.clock.now().getTime())
        issues.push({ path: ["expiresAt"], code: "IN_THE_PAST", message: "{expiresAt} must be in the future" });
    }
    const trustedDocumentsOnly = input.trustedDocumentsOnly ?? false;
    if (typeof trustedDocumentsOnly !== "boolean")
      issues.push({
        path: ["trustedDocumentsOnly"],
        code: "INVALID_BOOLEAN",
        message: "{trustedDocumentsOnly} must be a boolean",
      });
    if (issues.length > 0) throw validationFailed(issues);
    // A key grants only what its creator may do itself: otherwise a keys:write key would be every scope.
    const lacking = orderedScopes(scopes).find((scope) => !caller.scopes.has(scope));
    if (lacking) throw forbiddenScope(lacking);

    return this.store.transaction(async (store) => {
      const issued = await this.organizations.issueKey(store, caller.organizationId, {
        name,
        scopes,
        expiresAt,
        trustedDocumentsOnly: trustedDocumentsOnly as boolean,
      });
      await this.audit.record(store, change, {
        organizationId: caller.organizationId,
        action: "api_key.created",
        target: { type: "api_key", id: issued.id },
        changes: {
          name: { from: null, to: name },
          prefix: { from: null, to: issued.record.keyPrefix },
          scopes: { from: null, to: orderedScopes(scopes) },
          expires_at: { from: null, to: expiresAt?.toISOString() ?? null },
          trusted_documents_only: { from: null, to: trustedDocumentsOnly },
        },
      });
      return { apiKey: summaryOf(issued.record), key: issued.key };
    });
  }

  /** The organization's keys, revoked ones included, oldest first; never a key itself. */
  async listApiKeys(organizationId: string): Promise<ApiKeySummary[]> {
    return (await this.store.organizations.listApiKeys(organizationId)).map(summaryOf);
  }

  /** One of the organization's keys. @throws NOT_FOUND (another organization's key too). */
  async getApiKey(organizationId: string, id: string): Promise<ApiKeySummary> {
    const key = isUuid(id) ? await this.store.organizations.findApiKey(id.toLowerCase()) : null;
    if (!key || key.organizationId !== organizationId) throw notFound("API key");
    return summaryOf(key);
  }

  /**
   * Revokes one of the organization's keys at once: its next request, on any instance, is refused (every request
   * reads its key afresh; open subscriptions are re-checked). Revoking a revoked key changes nothing.
   * @throws NOT_FOUND (another organization's key too).
   */
  async revokeApiKey(organizationId: string, change: ChangeContext, id: string): Promise<void> {
    await this.store.transaction(async (store) => {
      const key = isUuid(id) ? await store.organizations.findApiKey(id.toLowerCase()) : null;
      if (!key || key.organizationId !== organizationId) throw notFound("API key");
      if (key.revokedAt !== null) return;
      const revoked = await store.organizations.revokeApiKey(key.id, this.clock.now());
      await this.audit.record(store, change, {
        organizationId,
        action: "api_key.revoked",
        target: { type: "api_key", id: key.id },
        changes: { revoked_at: { from: null, to: revoked?.revokedAt?.toISOString() ?? null } },
      });
    });
  }
}
