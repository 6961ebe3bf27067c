import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { AUTHENTICATION_CHALLENGE } from "../pipeline/access/authentication.ts";
import { DomainError, renderFieldNames, type ErrorCode, type FieldIssue } from "../domain/shared/errors.ts";
import { serializeTag } from "./serializers.ts";

/*
 * RFC 9457 problem details for every REST error. One exhaustive table maps domain codes to HTTP
 * statuses; pointers are JSON pointers into the body (`/tags/2/name`) or the name of the query parameter.
 */

export const STATUS_BY_CODE: Record<ErrorCode, number> = {
  VALIDATION_FAILED: 422,
  LIMIT_EXCEEDED: 422,
  NOT_FOUND: 404,
  CONFLICT: 409,
  UNAUTHENTICATED: 401,
  FORBIDDEN: 403,
  INVALID_QUERY_PARAMETER: 400,
  INVALID_LIMIT: 400,
  INVALID_CURSOR: 400,
  CURSOR_FILTER_MISMATCH: 400,
  INVALID_DATE_TIME: 400,
  INVALID_EVENT_TYPE: 400,
  INVALID_RANGE: 400,
  INVALID_ORDER: 400,
  IDEMPOTENCY_KEY_REUSED: 422,
  IDEMPOTENCY_KEY_IN_USE: 409,
  TOO_MANY_WAITING_POLLS: 429,
};

const TITLES: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  405: "Method Not Allowed",
  409: "Conflict",
  413: "Content Too Large",
  414: "URI Too Long",
  415: "Unsupported Media Type",
  422: "Unprocessable Content",
  429: "Too Many Requests",
  500: "Internal Server Error",
  503: "Service Unavailable",
};

export interface ProblemIssue {
  readonly pointer: string;
  readonly code: string;
  readonly message: string;
}

export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly code: string;
  readonly errors?: readonly ProblemIssue[];
  readonly [extension: string]: unknown;
}

export function problem(status: number, code: string, detail: string, extra: Record<string, unknown> = {}): Problem {
  return {
    // No public documentation URL exists for these problems, so RFC 9457's "about:blank" is the honest type;
    // `code` is the stable, machine-readable identifier.
    type: "about:blank",
    title: TITLES[status] ?? "Error",
    status,
    detail,
    code,
    ...extra,
  };
}

const snakeCase = (segment: string) => segment.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);

/** `["tags", 2, "name"]` -> `/tags/2/name` (body) or `tag_ids` (query parameter). */
export function pointerFor(issue: FieldIssue, location: "body" | "query"): string {
  if (location === "query") return snakeCase(String(issue.path[0] ?? ""));
  // The keys of the client's own document (FieldIssue.documentKeys) are named as written.
  const firstDocumentKey = issue.path.length - (issue.documentKeys ?? 0);
  return issue.path
    .map((segment, index) => {
      if (typeof segment === "number") return `/${segment}`;
      const name = index >= firstDocumentKey ? segment : snakeCase(segment);
      return `/${name.replaceAll("~", "~0").replaceAll("/", "~1")}`;
    })
    .join("");
}

/** A path of raw keys (not renamed) as a JSON pointer, escaping `~` and `/` as RFC 6901 asks. */
export function jsonPointer(path: readonly (string | number)[]): string {
  return path.map((segment) => `/${String(segment).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

/** A domain error as problem details; also one refused item of a bulk ingestion. */
export function fromDomainError(error: DomainError): Problem {
  const status = STATUS_BY_CODE[error.code];
  const location = status === 400 ? "query" : "body";
  const extra: Record<string, unknown> = {};
  if (error.issues.length > 0) {
    extra.errors = error.issues.map((issue) => ({
      pointer: pointerFor(issue, location),
      code: issue.code,
      message: renderFieldNames(issue.message, snakeCase),
    }));
  }
  const existingTag = error.meta.existingTag as Parameters<typeof serializeTag>[0] | undefined;
  if (existingTag) extra.existing_tag = serializeTag(existingTag);
  if (typeof error.meta.limit === "number") extra.limit = error.meta.limit;
  if (typeof error.meta.matched === "number") extra.matched = error.meta.matched;
  if (typeof error.meta.requiredScope === "string") extra.required_scope = error.meta.requiredScope;
  return problem(status, error.code, detailOf(error, location), extra);
}

/**
 * The problem's `detail`. A validation failure names its first field as the `pointer` of `errors[0]` names it
 * (`/tag_ids/0`), not as the domain's dotted path.
 */
function detailOf(error: DomainError, location: "body" | "query"): string {
  const [first, ...more] = error.issues;
  if (error.code !== "VALIDATION_FAILED" || first === undefined) return renderFieldNames(error.message, snakeCase);
  const at = first.path.length > 0 ? pointerFor(first, location) : location;
  const summary = `${renderFieldNames(first.message, snakeCase)} (at ${at})`;
  return more.length > 0 ? `${summary} and ${more.length} more` : summary;
}

/** ajv error -> issue; `instancePath` is already a JSON pointer. */
interface AjvError {
  readonly keyword: string;
  readonly instancePath: string;
  readonly message?: string;
  readonly params: Record<string, unknown>;
}

const QUERY_PARAMETER_CODES: Record<string, ErrorCode> = {
  limit: "INVALID_LIMIT",
  cursor: "INVALID_CURSOR",
  order: "INVALID_ORDER",
  from: "INVALID_DATE_TIME",
  to: "INVALID_DATE_TIME",
  type: "INVALID_EVENT_TYPE",
};

/** What a caller who sent a wrong value most likely wanted instead. */
const QUERY_PARAMETER_HINTS: Record<string, string> = {
  tag_match: "to leave out references carrying tags, use exclude_tag_ids or exclude_tag_names",
};

/** A 400 for one query parameter, with the parameter's own code (`INVALID_LIMIT`, ...) as for schema errors. */
export function queryParameterProblem(parameter: string, message: string): Problem {
  return fromValidationError([{ keyword: "type", instancePath: `/${parameter}`, message, params: {} }], "querystring");
}

function fromValidationError(errors: readonly AjvError[], context: string | undefined): Problem {
  const issues: ProblemIssue[] = errors.map((error) => {
    let pointer = error.instancePath;
    if (error.keyword === "required") pointer += `/${String(error.params.missingProperty)}`;
    if (error.keyword === "additionalProperties") pointer += `/${String(error.params.additionalProperty)}`;
    const allowed = error.keyword === "enum" ? error.params.allowedValues : undefined;
    const message =
      error.keyword === "additionalProperties"
        ? `unknown field "${String(error.params.additionalProperty)}"`
        : error.keyword === "maxProperties" || error.keyword === "minProperties"
          ? "a tag entry must have exactly one of id or name"
          : Array.isArray(allowed)
            ? `must be one of ${allowed.map(String).join(", ")}`
            : (error.message ?? "is invalid");
    return { pointer, code: error.keyword.toUpperCase(), message };
  });
  if (context === "querystring") {
    const parameter = issues[0]?.pointer.replace(/^\//, "").split("/")[0] ?? "";
    const code = QUERY_PARAMETER_CODES[parameter] ?? "INVALID_QUERY_PARAMETER";
    const hint = QUERY_PARAMETER_HINTS[parameter];
    const detail =
      parameter === "limit"
        ? "limit must be an integer from 1 to 500"
        : `query parameter ${parameter} ${issues[0]?.message ?? "is invalid"}${hint ? ` (${hint})` : ""}`;
    return problem(400, code, detail, {
      errors: issues.map((issue) => ({ ...issue, pointer: issue.pointer.replace(/^\//, "").split("/")[0] ?? "" })),
    });
  }
  const first = issues[0];
  return problem(422, "VALIDATION_FAILED", first ? `${first.pointer || "body"}: ${first.message}` : "invalid body", {
    errors: issues,
  });
}

/** Fastify's own errors (body parsing, limits) -> problem details. */
function fromFastifyError(error: FastifyError): Problem | null {
  switch (error.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return problem(413, "PAYLOAD_TOO_LARGE", "The request body is larger than the server accepts");
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return problem(415, "UNSUPPORTED_MEDIA_TYPE", "Send request bodies as application/json");
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return problem(400, "MALFORMED_REQUEST", "The body is empty but content-type says application/json");
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return problem(400, "MALFORMED_REQUEST", "Content-Length does not match the body");
    case "FST_ERR_MAX_PARAM_LENGTH":
      return problem(414, "URI_TOO_LONG", "A path parameter is longer than the server accepts");
    case "FST_ERR_BAD_URL":
      return problem(400, "MALFORMED_REQUEST", "The request path is not a valid URL");
    default:
      break;
  }
  if (error instanceof SyntaxError || error.code === "FST_ERR_CTP_INVALID_JSON_BODY") {
    return problem(400, "MALFORMED_JSON", `The body is not valid JSON: ${error.message}`);
  }
  if (error.statusCode === 429) {
    return problem(429, "RATE_LIMITED", error.message || "Too many requests; retry after the time in Retry-After");
  }
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    return problem(error.statusCode, "BAD_REQUEST", error.message);
  }
  return null;
}

/** Seconds a client is asked to wait (`Retry-After`) when the database is unavailable. */
export const RETRY_AFTER_SECONDS = 5;

/**
 * Any error as problem details. `isServiceUnavailable` recognizes a transient outage (the database lost or
 * unreachable): 503 SERVICE_UNAVAILABLE with Retry-After, logged like every unexpected error.
 */
export function toProblem(
  error: unknown,
  request: FastifyRequest,
  isServiceUnavailable: (error: unknown) => boolean = () => false,
): Problem {
  if (error instanceof DomainError) return fromDomainError(error);
  if (isServiceUnavailable(error)) {
    request.log.error({ err: error, method: request.method, url: request.url }, "database unavailable");
    return problem(503, "SERVICE_UNAVAILABLE", "The service cannot reach its database; retry shortly", {
      request_id: request.id,
    });
  }
  const fastifyError = error as FastifyError & { validationContext?: string };
  if (Array.isArray(fastifyError.validation)) {
    return fromValidationError(fastifyError.validation as unknown as AjvError[], fastifyError.validationContext);
  }
  const known = fromFastifyError(fastifyError);
  if (known) return known;
  // Unexpected: log everything we know, tell the caller nothing internal.
  request.log.error({ err: error, method: request.method, url: request.url }, "unhandled error");
  return problem(500, "INTERNAL", "An unexpected error occurred; it has been logged", { request_id: request.id });
}

export function sendProblem(reply: FastifyReply, body: Problem): FastifyReply {
  if (body.status === 503) reply.header("retry-after", String(RETRY_AFTER_SECONDS));
  if (body.status === 401) reply.header("www-authenticate", AUTHENTICATION_CHALLENGE);
  // A refusal to wait (too many waiting polls) passes in a moment; the rate limiters set their own.
  if (body.status === 429 && !reply.hasHeader("retry-after")) reply.header("retry-after", "1");
  return reply.code(body.status).type("application/problem+json").send(body);
}
