import { HeaderMap } from "@apollo/server";
import { unwrapResolverError } from "@apollo/server/errors";
import type { GraphQLFormattedError } from "graphql";
import { AUTHENTICATION_CHALLENGE } from "../access/authentication.ts";
import type { Tag } from "../../domain/models.ts";
import { DomainError, renderFieldNames, type ErrorCode, type FieldIssue } from "../../domain/shared/errors.ts";
import { GraphQLError } from "graphql";

/*
 * GraphQL errors. Glossary:
 * - domain path: where a service found a problem, relative to the raw input it was given (`["tags", 2, "name"]`);
 * - field: where that input sits in the operation's arguments, as a dot path (`input.tags.2.name`), given in
 *   `extensions.field`. An `InputLocator` turns the first into the second for one GraphQL field.
 *
 * Every error a client sees has `extensions.code`. Errors this module does not know (anything that is not a
 * DomainError or an already coded GraphQLError) are unexpected: they are logged by the server and reach the
 * client only as INTERNAL_SERVER_ERROR "Internal server error".
 */

/** The code each domain error carries in `extensions.code`. Exhaustive: a new domain code must be placed here. */
export const GRAPHQL_CODE_BY_DOMAIN_CODE: Readonly<Record<ErrorCode, string>> = {
  VALIDATION_FAILED: "VALIDATION_FAILED",
  LIMIT_EXCEEDED: "LIMIT_EXCEEDED",
  NOT_FOUND: "NOT_FOUND",
  CONFLICT: "CONFLICT",
  UNAUTHENTICATED: "UNAUTHENTICATED",
  FORBIDDEN: "FORBIDDEN",
  // A malformed filter value or page size is an argument error in GraphQL terms: GraphQL's own code.
  INVALID_QUERY_PARAMETER: "BAD_USER_INPUT",
  INVALID_LIMIT: "BAD_USER_INPUT",
  INVALID_CURSOR: "INVALID_CURSOR",
  CURSOR_FILTER_MISMATCH: "CURSOR_FILTER_MISMATCH",
  INVALID_DATE_TIME: "INVALID_DATE_TIME",
  INVALID_EVENT_TYPE: "INVALID_EVENT_TYPE",
  INVALID_RANGE: "INVALID_RANGE",
  INVALID_ORDER: "INVALID_ORDER",
  IDEMPOTENCY_KEY_REUSED: "IDEMPOTENCY_KEY_REUSED",
  IDEMPOTENCY_KEY_IN_USE: "IDEMPOTENCY_KEY_IN_USE",
  TOO_MANY_WAITING_POLLS: "TOO_MANY_WAITING_POLLS",
};

export const INTERNAL_SERVER_ERROR = "INTERNAL_SERVER_ERROR";
const INTERNAL_SERVER_ERROR_MESSAGE = "Internal server error";

export type InputPath = readonly (string | number)[];

/** Maps a domain path to the path of the same value in one GraphQL field's arguments. */
export type InputLocator = (domainPath: InputPath, args: Readonly<Record<string, unknown>>) => InputPath;

type Rename = InputPath | ((args: Readonly<Record<string, unknown>>) => InputPath);

/**
 * A locator for a service input found under the argument `base` (e.g. `["input"]` or `["filter"]`), with
 * `renames` for the domain names that are separate arguments or named differently in GraphQL (e.g. the
 * domain's `cursor` is the argument `after`).
 */
export function underArgument(base: InputPath, renames: Readonly<Record<string, Rename>> = {}): InputLocator {
  return (domainPath, args) => {
    const [head, ...rest] = domainPath;
    const rename = typeof head === "string" ? renames[head] : undefined;
    if (rename === undefined) return [...base, ...domainPath];
    return [...(typeof rename === "function" ? rename(args) : rename), ...rest];
  };
}

/** The input lives at the root of the field's arguments, the domain's `cursor` being `after`. */
export const AT_ARGUMENTS: InputLocator = underArgument([], { cursor: ["after"] });

const dotted = (path: InputPath): string => path.join(".");

/** Domain field names are GraphQL's own (camelCase), so a `{field}` reference is rendered as it is written. */
const asGraphqlName = (segment: string): string => segment;

/** A GraphQL argument error (page sizes, argument combinations): BAD_USER_INPUT naming the argument. */
export function badUserInput(message: string, field: InputPath): GraphQLError {
  return new GraphQLError(message, { extensions: { code: "BAD_USER_INPUT", field: dotted(field) } });
}

/** A missing, unknown or revoked API key. Over HTTP the response is a 401 (Apollo reads `extensions.http`). */
export function unauthenticated(message: string): GraphQLError {
  return new GraphQLError(message, {
    extensions: {
      code: "UNAUTHENTICATED",
      http: { status: 401, headers: new HeaderMap([["www-authenticate", AUTHENTICATION_CHALLENGE]]) },
    },
  });
}

/**
 * A DomainError as a GraphQL error: `extensions.code` from the table above, `field` and `issues` located in
 * the operation's arguments, and the code-specific facts (`existingTag` on a name conflict, `limit`).
 * Anything else is returned unchanged, for {@link formatGraphqlError} to judge.
 */
export function toGraphqlError(
  error: unknown,
  locate: InputLocator = AT_ARGUMENTS,
  args: Readonly<Record<string, unknown>> = {},
): unknown {
  if (!(error instanceof DomainError)) return error;
  const field = (issue: FieldIssue) => dotted(locate(issue.path, args));
  const extensions: Record<string, unknown> = { code: GRAPHQL_CODE_BY_DOMAIN_CODE[error.code] };
  const [first] = error.issues;
  if (first) {
    extensions.field = field(first);
    extensions.issues = error.issues.map((issue) => ({
      field: field(issue),
      code: issue.code,
      message: renderFieldNames(issue.message, asGraphqlName),
    }));
  }
  const existingTag = error.meta.existingTag as Tag | undefined;
  if (existingTag) extensions.existingTag = { id: existingTag.id, name: existingTag.name };
  if (typeof error.meta.limit === "number") extensions.limit = error.meta.limit;
  if (typeof error.meta.matched === "number") extensions.matched = error.meta.matched;
  if (typeof error.meta.requiredScope === "string") extensions.requiredScope = error.meta.requiredScope;
  return new GraphQLError(renderFieldNames(error.message, asGraphqlName), { extensions, originalError: error });
}

/**
 * An input problem found in a GraphQL variable before execution (not well-formed Unicode, nested too deeply):
 * VALIDATION_FAILED like the same problem in a REST body.
 * `field` is the variable's path as graphql-js writes it (`input.tags.2.name` for `$input`).
 */
export function variableIssueError(issue: FieldIssue, limit?: number): GraphQLError {
  const field = dotted(issue.path);
  return new GraphQLError(`Variable "$${String(issue.path[0])}" at "${field}": ${issue.message}`, {
    extensions: {
      code: "VALIDATION_FAILED",
      field,
      issues: [{ field, code: issue.code, message: issue.message }],
      ...(limit !== undefined && { limit }),
    },
  });
}

/**
 * graphql-js's own argument coercion errors, raised while executing a field whose literal arguments embed
 * variables (`{ name: $n }` in a `@oneOf` input with `$n` null): input errors, reported as BAD_USER_INPUT
 * naming the argument. graphql-js gives them no code, so they are recognized by their fixed message.
 */
const ARGUMENT_COERCION_ERROR = /^Argument "([^"]+)" (?:has invalid value|of required type|of non-null type)/;

function argumentCoercionField(error: unknown): string | null {
  if (!(error instanceof GraphQLError) || error.originalError !== undefined) return null;
  return ARGUMENT_COERCION_ERROR.exec(error.message)?.[1] ?? null;
}

/**
 * Apollo Server's answers to a malformed `extensions.persistedQuery` (automatic persisted queries) that it raises
 * with an HTTP 400 but no code: a hash that does not match the query sent with it, a version other than 1. They
 * are the client's mistake, not the server's: coded BAD_REQUEST (Apollo's code for a malformed request) with a
 * message that says what to send, and not logged. Recognized by their fixed messages, as Apollo gives them no
 * class or code. (An unknown hash without its query is Apollo's own PERSISTED_QUERY_NOT_FOUND, already coded.)
 */
const PERSISTED_QUERY_MISTAKES: ReadonlyMap<string, string> = new Map([
  ["provided sha does not match query", "provided sha does not match query"],
  [
    "Unsupported persisted query version",
    "Unsupported persisted query version: this server supports extensions.persistedQuery.version 1",
  ],
]);

function persistedQueryMistake(error: unknown): string | null {
  if (!(error instanceof GraphQLError) || error.originalError !== undefined) return null;
  if (error.extensions.code !== undefined) return null;
  return PERSISTED_QUERY_MISTAKES.get(error.message) ?? null;
}

/** What a client sees when a query document cannot be parsed for a reason other than its syntax. */
const PARSE_FAILED_MESSAGE = "The query document could not be parsed: it is nested too deeply or is too long";

/**
 * True when parsing a query document failed inside the parser (its recursion ran out of stack on a deeply
 * nested document) rather than on a syntax error: the error or one of its causes is not a GraphQLError.
 */
export function isInternalParseFailure(error: unknown): boolean {
  let current: unknown = error;
  while (current instanceof GraphQLError) current = current.originalError;
  return current !== undefined && current !== null;
}

/** A parse failure as the client sees it: GRAPHQL_PARSE_FAILED, with no internal text. */
export function parseFailedError(): GraphQLError {
  return new GraphQLError(PARSE_FAILED_MESSAGE, { extensions: { code: "GRAPHQL_PARSE_FAILED" } });
}

/**
 * True for an error the server did not anticipate: not a DomainError and not a GraphQLError that carries a
 * code (graphql-js's own execution errors, such as a null in a non-null field, have none). These are logged
 * and masked.
 */
export function isUnexpectedError(error: unknown): boolean {
  const original = unwrapResolverError(error);
  if (original instanceof DomainError || argumentCoercionField(original) !== null) return false;
  if (persistedQueryMistake(original) !== null) return false;
  return !(original instanceof GraphQLError && typeof original.extensions.code === "string");
}

/**
 * The masking of every GraphQL error, HTTP and graphql-ws alike (through error-masking.ts, which adds the
 * database outage): expected errors pass through, a DomainError that escaped a resolver is converted, anything
 * else is masked. Logging happens in error-masking.ts too, with the request's or connection's logger.
 */
export function formatGraphqlError(formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError {
  const original = unwrapResolverError(error);
  if (original instanceof DomainError) {
    const converted = toGraphqlError(original) as GraphQLError;
    return { ...formatted, message: converted.message, extensions: converted.extensions };
  }
  if (formatted.extensions?.code === "GRAPHQL_PARSE_FAILED" && isInternalParseFailure(original)) {
    return { message: PARSE_FAILED_MESSAGE, extensions: { code: "GRAPHQL_PARSE_FAILED" } };
  }
  const mistake = persistedQueryMistake(original);
  if (mistake !== null) return { message: mistake, extensions: { code: "BAD_REQUEST" } };
  const argument = argumentCoercionField(original);
  if (argument !== null) return { ...formatted, extensions: { code: "BAD_USER_INPUT", field: argument } };
  if (!isUnexpectedError(error)) return formatted;
  return {
    message: INTERNAL_SERVER_ERROR_MESSAGE,
    ...(formatted.locations && { locations: formatted.locations }),
    ...(formatted.path && { path: formatted.path }),
    extensions: { code: INTERNAL_SERVER_ERROR },
  };
}
