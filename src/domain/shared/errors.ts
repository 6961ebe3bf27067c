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
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

/** One problem with one input field. `path` is relative to the operation's input: `["tags", 2, "name"]`. */
export interface FieldIssue {
  readonly path: readonly (string | number)[];
  readonly code: string;
  readonly message: string;
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

export function notFound(what: string): DomainError {
  return new DomainError("NOT_FOUND", `${what} not found`);
}

export function validationFailed(issues: readonly FieldIssue[]): DomainError {
  const first = issues[0];
  const summary = first ? `${first.message} (at ${first.path.join(".") || "input"})` : "invalid input";
  return new DomainError(
    "VALIDATION_FAILED",
    issues.length > 1 ? `${summary} and ${issues.length - 1} more` : summary,
    issues,
  );
}
