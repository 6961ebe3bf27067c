/*
 * Glossary. An *audit event* records one administrative change of an organization (SPEC §3.1): who made it (the
 * *actor*: an API key, or the operator's CLI), what it changed (the *target*), each changed field from -> to, and
 * the request that made it. It is written in the transaction of the change, so that a change and its record
 * commit or roll back together. It never holds a secret, a key or a password; URLs are masked as reads show them.
 */

export const AUDIT_ACTIONS = [
  "api_key.created",
  "api_key.revoked",
  "webhook_endpoint.created",
  "webhook_endpoint.updated",
  "webhook_endpoint.deleted",
  "webhook_endpoint.secret_rotated",
  "webhook_endpoint.signing_key_rotated",
  "webhook_endpoint.recovery_started",
  "webhook_endpoint.replay_started",
  "trusted_documents.registered",
  "tag.deleted",
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export function isAuditAction(value: string): value is AuditAction {
  return (AUDIT_ACTIONS as readonly string[]).includes(value);
}

export type AuditActor =
  { readonly kind: "api_key"; readonly apiKeyId: string; readonly prefix: string } | { readonly kind: "cli" };

/** Who is making a change, and in which request: handed by the adapter to each administrative service method. */
export interface ChangeContext {
  readonly actor: AuditActor;
  /** The request's id (REST and GraphQL over HTTP), null for the CLI. */
  readonly requestId: string | null;
}

/** A change made by the operator's `reftrail` command. */
export const CLI_CHANGE: ChangeContext = { actor: { kind: "cli" }, requestId: null };

/** A change made by a request authenticated with `caller`'s key (a `Caller`). */
export function changeBy(
  caller: { readonly apiKeyId: string; readonly apiKeyPrefix: string },
  requestId: string | null,
): ChangeContext {
  return { actor: { kind: "api_key", apiKeyId: caller.apiKeyId, prefix: caller.apiKeyPrefix }, requestId };
}

/** One field's change. Values are plain JSON; a secret is never one of them. */
export interface FieldChange {
  readonly from: unknown;
  readonly to: unknown;
}

export interface AuditEvent {
  readonly id: string;
  readonly organizationId: string;
  readonly occurredAt: Date;
  readonly action: AuditAction;
  readonly actor: AuditActor;
  readonly target: { readonly type: string; readonly id: string };
  readonly changes: Readonly<Record<string, FieldChange>>;
  readonly requestId: string | null;
}

/** The fields of `before` and `after` whose values differ (compared as JSON), as from -> to. */
export function changedFields(
  before: Readonly<Record<string, unknown>>,
  after: Readonly<Record<string, unknown>>,
): Record<string, FieldChange> {
  const changes: Record<string, FieldChange> = {};
  for (const field of new Set([...Object.keys(before), ...Object.keys(after)])) {
    const from = before[field] ?? null;
    const to = after[field] ?? null;
    if (JSON.stringify(from) !== JSON.stringify(to)) changes[field] = { from, to };
  }
  return changes;
}
