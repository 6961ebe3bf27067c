/**
 * Domain errors carry a stable code; each transport maps codes exhaustively (REST: `rest/problem.ts`,
 * GraphQL: `graphql/errors.ts`). Anything that is not a DomainError is unexpected: logged and masked.
 */
export const ERROR_CODES = [
  "VALIDATION_FAILED",
  "LIMIT_EXCEEDED",
  "NOT_FOUND",
  "CONFLICT",
  "UNAUTHENTICATED",
  "FORBIDDEN",
  "INVALID_QUERY_PARAMETER",
  "INVALID_LIMIT",
  "INVALID_CURSOR",
  "CURSOR_FILTER_MISMATCH",
  "INVALID_DATE_TIME",
  "INVALID_EVENT_TYPE",
  "INVALID_RANGE",
  "INVALID_ORDER",
  "IDEMPOTENCY_KEY_REUSED",
  "IDEMPOTENCY_KEY_IN_USE",
  "TOO_MANY_WAITING_POLLS",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/**
 * One problem with one input field. `path` is relative to the operation's input: `["tags", 2, "name"]`, in the
 * domain's (camelCase) names. A message that names a field writes it in braces, `"{carrierCode} must be a SCAC"`,
 * because each surface spells fields its own way: REST renders `carrier_code`, GraphQL `carrierCode` (see
 * {@link renderFieldNames}). The same holds for a DomainError's own message.
 */
export interface FieldIssue {
  readonly path: readonly (string | number)[];
  readonly code: string;
  readonly message: string;
  /**
   * How many segments at the end of `path` are keys of a document the client wrote (an update document), which
   * every surface names as written: a REST pointer does not snake_case them. Counted from the end, so that a
   * prefix added to the path (`items.3.update`) keeps it true.
   */
  readonly documentKeys?: number;
}

export class DomainError extends Error {
  override readonly name = "DomainError";

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly issues: readonly FieldIssue[] = [],
    /** Extra, code-specific facts the caller may use, e.g. the existing tag on a name conflict. */
    readonly meta: Readonly<Record<string, unknown>> = {},
  ) {
    super(message);
  }
}

const FIELD_REFERENCE = /\{([A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z0-9]+)*)\}/g;

/**
 * A domain message with its `{field}` references spelled by `spell`, one path segment at a time
 * (`{tags.2.tagId}` -> `tags.2.tag_id` for REST). Braces around anything else (`{ id }`) are left alone.
 */
export function renderFieldNames(message: string, spell: (segment: string) => string): string {
  return message.replace(FIELD_REFERENCE, (_match, path: string) => path.split(".").map(spell).join("."));
}

/**
 * The caller's key lacks the scope an operation needs (SPEC §3.1): about the key, never about an object (another
 * organization's object stays NOT_FOUND).
 */
export function forbiddenScope(requiredScope: string): DomainError {
  return new DomainError("FORBIDDEN", `The API key lacks the scope ${requiredScope}`, [], { requiredScope });
}

export function notFound(what: string): DomainError {
  return new DomainError("NOT_FOUND", `${what} not found`);
}

export function validationFailed(issues: readonly FieldIssue[]): DomainError {
  const first = issues[0];
  const at = first && first.path.length > 0 ? `{${first.path.join(".")}}` : "input";
  const summary = first ? `${first.message} (at ${at})` : "invalid input";
  return new DomainError(
    "VALIDATION_FAILED",
    issues.length > 1 ? `${summary} and ${issues.length - 1} more` : summary,
    issues,
  );
}
