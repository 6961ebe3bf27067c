import { API_KEY_SCHEMAS } from "./api-key-schemas.ts";
import type { FastifyInstance } from "fastify";
import { EVENT_TYPE_DESCRIPTIONS } from "../domain/lifecycle/event-detail-schemas.ts";
import { LIFECYCLE_EVENT_TYPES } from "../domain/lifecycle/lifecycle-event.ts";
import { dateTime, freeForm, nullableDateTime, nullableUuid, page, record, uuid } from "./response-schema-parts.ts";
import { deactivateReasonSchema } from "./schemas.ts";
import { WEBHOOK_RESPONSE_SCHEMAS } from "./webhook-response-schemas.ts";
import { TRUSTED_DOCUMENT_SCHEMAS } from "./trusted-document-schemas.ts";

/*
 * Response bodies of the /v1 routes, as shared JSON Schemas (`app.addSchema`). They do two jobs at once:
 * Fastify serializes every response with them (fast-json-stringify), and @fastify/swagger publishes them as
 * `components.schemas` of /v1/openapi.json, where each operation refers to them. So the document cannot drift
 * from what is sent. Two rules keep that honest:
 * - every object lists all its fields as `required` (absent values are `null`, never missing), so a schema
 *   field that the serializer stops producing fails with a 500 instead of vanishing;
 * - every object is `additionalProperties: false`, so a field a serializer adds without documenting it would be
 *   stripped; test/openapi.test.ts checks every handler's output against these schemas before serialization,
 *   so such a field fails the test instead of disappearing silently.
 * Free-form JSON (an event's `detail`, an update document, a webhook body) is `additionalProperties: true`.
 */

/** The event catalog's words for each type (GET /v1/event-types has each `detail`'s JSON Schema). */
function detailDescription(): string {
  const byType = LIFECYCLE_EVENT_TYPES.map((type) => `${type}: ${EVENT_TYPE_DESCRIPTIONS[type].description}`);
  return (
    "Type-specific facts, snake_case keys; always reference_id and organization_id. Its JSON Schema for each " +
    `type is the payload of that type in GET /v1/event-types. By type: ${byType.join(" ")}`
  );
}

const tagProperties = {
  id: { ...uuid, description: "Tag id" },
  name: { type: "string", description: "The name as created (unique case-insensitively)" },
};

const problemIssue = record("One problem with one input", {
  pointer: {
    type: "string",
    description: "JSON pointer into the body (`/tags/2/name`), or the name of the query parameter or header",
  },
  code: { type: "string", description: "Stable, machine-readable code of this issue" },
  message: { type: "string" },
});

/** Every component, in the order they appear in the document; `$id` is the component's name. */
export const RESPONSE_SCHEMAS = [
  { $id: "TagRef", ...record("A tag as listed on a reference", tagProperties) },
  { $id: "Tag", ...record("A label of the organization", { ...tagProperties, created_at: dateTime }) },
  { $id: "TagPage", ...page("A page of tags in case-insensitive name order", "Tag") },
  {
    $id: "Reference",
    ...record("A shipping reference (container, bill of lading or booking)", {
      id: { ...uuid, description: "Reference id" },
      reference_id: { ...uuid, description: "Equals `id` (compatibility with the original service)" },
      organization_id: uuid,
      container_id: { type: ["string", "null"], description: "ISO 6346 container number" },
      bill_of_lading: { type: ["string", "null"] },
      booking_number: { type: ["string", "null"] },
      carrier_code: { type: "string", description: "SCAC, upper-case" },
      carrier_scac: { type: "string", description: "Equals `carrier_code`" },
      parent_reference_id: {
        ...nullableUuid,
        description: "The bill of lading / booking a container was found on",
      },
      active: { type: "boolean" },
      deactivate_reason: { type: ["string", "null"], enum: [...deactivateReasonSchema.enum, null] },
      auto_unsubscribed: { type: "boolean", description: "Deactivated by the service itself" },
      last_update_status: { type: ["string", "null"], enum: ["succeeded", "failed", null] },
      consecutive_failures: { type: "integer", description: "Failed extractions since the last success" },
      estimated_departure: nullableDateTime,
      estimated_arrival: nullableDateTime,
      tags: { type: "array", items: { $ref: "TagRef#" } },
      created_at: dateTime,
      updated_at: dateTime,
    }),
  },
  { $id: "ReferencePage", ...page("A page of references, newest first", "Reference") },
  {
    $id: "ReferenceCreated",
    ...record("The created reference", {
      message: { type: "string", const: "Reference created successfully." },
      reference: { $ref: "Reference#" },
    }),
  },
  {
    $id: "ReferenceTags",
    ...record("Every tag on the reference after the change", {
      reference_id: uuid,
      tags: { type: "array", items: { $ref: "TagRef#" } },
    }),
  },
  {
    $id: "ReferenceList",
    ...record("References (not paged)", { data: { type: "array", items: { $ref: "Reference#" } } }),
  },
  {
    $id: "ReferenceUpdate",
    ...record("A reference update as stored", {
      id: { ...uuid, description: "Update id" },
      reference_id: uuid,
      organization_id: uuid,
      update: { ...freeForm, description: "The JSON document as received" },
      created_at: dateTime,
    }),
  },
  { $id: "ReferenceUpdatePage", ...page("A page of updates, newest first", "ReferenceUpdate") },
  {
    $id: "LifecycleEvent",
    ...record("An entry of a reference's lifecycle log", {
      id: { ...uuid, description: "Event id (also the webhook body's `id`)" },
      occurred_at: dateTime,
      reference_id: uuid,
      organization_id: uuid,
      type: { type: "string", enum: [...LIFECYCLE_EVENT_TYPES] },
      detail: { ...freeForm, description: detailDescription() },
    }),
  },
  { $id: "LifecycleEventPage", ...page("A page of the lifecycle log", "LifecycleEvent") },
  {
    $id: "EventFeedPage",
    ...record("A page of the organization's lifecycle log in live order (the feed to poll)", {
      data: { type: "array", items: { $ref: "LifecycleEvent#" } },
      next_cursor: {
        type: "string",
        description:
          "Pass as `after` to read on: always present, also on an empty page. It may lie past the last event (up to " +
          "the end of the log as this poll read it); nothing committed later comes before it. Also a valid `after` " +
          "of the GraphQL subscription `lifecycleEvents`",
      },
      has_more: {
        type: "boolean",
        description: "true: the page stopped before the end of the log (full, or the scan's bound); poll again at once",
      },
    }),
  },
  {
    $id: "IngestionItemError",
    ...record("Why an item was refused: the problem the same report would get alone, located in the request", {
      status: { type: "integer", description: "The HTTP status the item alone would get (404, 409, 422)" },
      code: { type: "string", description: "NOT_FOUND, CONFLICT, VALIDATION_FAILED" },
      detail: { type: "string" },
      errors: {
        type: "array",
        items: { $ref: "ProblemIssue#" },
        description: "Each input at fault, with a JSON pointer into the request (`/items/17/error/code`)",
      },
    }),
  },
  {
    $id: "IngestionItemResult",
    ...record("What one item of a bulk ingestion did", {
      index: { type: "integer", description: "The item's position in `items`, from 0" },
      ok: { type: "boolean", description: "Saved (true) or refused (false, per_item mode only)" },
      reference_id: { type: ["string", "null"], description: "The item's reference_id as given" },
      events: {
        type: "array",
        items: { $ref: "LifecycleEvent#" },
        description: "The events the item wrote, in log order (none when it changed nothing or was refused)",
      },
      update: {
        anyOf: [{ $ref: "ReferenceUpdate#" }, { type: "null" }],
        description: "For an update item: the stored update",
      },
      error: { anyOf: [{ $ref: "IngestionItemError#" }, { type: "null" }], description: "Why it was refused" },
    }),
  },
  {
    $id: "IngestionResult",
    ...record("The outcome of a bulk ingestion", {
      mode: { type: "string", enum: ["atomic", "per_item"] },
      succeeded: { type: "integer", description: "Items saved" },
      failed: { type: "integer", description: "Items refused (per_item mode)" },
      event_count: { type: "integer", description: "Every event the request wrote, change events included" },
      items: { type: "array", items: { $ref: "IngestionItemResult#" }, description: "One per item, in order" },
    }),
  },
  ...WEBHOOK_RESPONSE_SCHEMAS,
  ...TRUSTED_DOCUMENT_SCHEMAS,
  ...API_KEY_SCHEMAS,
  { $id: "ProblemIssue", ...problemIssue },
  {
    $id: "Problem",
    type: "object",
    description:
      "RFC 9457 problem details. `code` is the stable identifier; `errors` lists each input at fault. " +
      "Extension members beyond those listed may be added (RFC 9457 §3.2).",
    properties: {
      type: { type: "string", description: "Always about:blank (no documentation URL exists)" },
      title: { type: "string" },
      status: { type: "integer" },
      detail: { type: "string" },
      code: { type: "string" },
      errors: { type: "array", items: { $ref: "ProblemIssue#" } },
      existing_tag: { $ref: "Tag#", description: "On a name conflict (409): the tag that holds the name" },
      limit: { type: "integer", description: "With LIMIT_EXCEEDED: the limit that was reached" },
      matched: {
        type: "integer",
        description: "With LIMIT_EXCEEDED from recover or replay: how many deliveries the window matched",
      },
      request_id: { type: "string", description: "With INTERNAL: quote it when reporting the error" },
      required_scope: {
        type: "string",
        description: "With FORBIDDEN for a scope: the scope the API key lacks",
      },
    },
    required: ["type", "title", "status", "detail", "code"],
    additionalProperties: true,
  },
] as const;

export type ResponseSchemaName = (typeof RESPONSE_SCHEMAS)[number]["$id"];

export function registerResponseSchemas(app: FastifyInstance): void {
  for (const schema of RESPONSE_SCHEMAS) app.addSchema(schema);
}

const ref = (name: ResponseSchemaName) => ({ $ref: `${name}#` });

const idempotentReplayedHeader = {
  "Idempotent-Replayed": {
    type: "string",
    enum: ["true"],
    description: "Present when this is the stored response of an earlier request with the same Idempotency-Key",
  },
};

export interface SuccessOptions {
  /** 201: the `Location` header names the created resource. */
  readonly location?: boolean;
  /** POST: the response may be a replay (Idempotency-Key). */
  readonly replayable?: boolean;
}

/** A 2xx response with a JSON body of a shared schema, and its headers. */
export function success(description: string, schema: ResponseSchemaName, options: SuccessOptions = {}) {
  const headers = {
    ...(options.location && {
      Location: { type: "string", description: "Path of the created resource, e.g. /v1/tags/{tagId}" },
    }),
    ...(options.replayable && idempotentReplayedHeader),
  };
  return {
    description,
    ...(Object.keys(headers).length > 0 && { headers }),
    content: { "application/json": { schema: ref(schema) } },
  };
}

/** A 204: no body. */
export const noContent = (description: string) => ({ description, type: "null" }) as const;

const PROBLEM_DESCRIPTIONS: Record<number, string> = {
  400: "Malformed input: syntax, a query parameter, a cursor (`code` says which)",
  401: "Missing, invalid or revoked API key (UNAUTHENTICATED)",
  403:
    "The key may not do this (FORBIDDEN): its scopes lack `required_scope`, or a trusted-documents-only " +
    "key registering documents",
  404: "No such resource in the caller's organization (NOT_FOUND)",
  409: "Conflicts with the current state (CONFLICT, IDEMPOTENCY_KEY_IN_USE)",
  413: "The body is larger than the server accepts (PAYLOAD_TOO_LARGE)",
  415: "The body is not application/json (UNSUPPORTED_MEDIA_TYPE)",
  422: "Well-formed but invalid (VALIDATION_FAILED, LIMIT_EXCEEDED, IDEMPOTENCY_KEY_REUSED)",
  429:
    "Over the API key's cost budget (THROTTLED), over RATE_LIMIT_PER_MINUTE (RATE_LIMITED), or too many long " +
    "polls waiting (TOO_MANY_WAITING_POLLS); retry after Retry-After",
  500: "Unexpected error (INTERNAL); nothing internal is disclosed",
};

const PROBLEM_HEADERS: Record<number, Record<string, object>> = {
  401: {
    "WWW-Authenticate": {
      type: "string",
      description: 'Bearer realm="reftrail"; the key may also be sent as X-API-Key',
    },
  },
  429: {
    "Retry-After": {
      type: "integer",
      description:
        "Whole seconds until the key's budget holds what the request costs (THROTTLED), or the rate limit resets",
    },
  },
};

/**
 * Problem responses (application/problem+json) for the given statuses, plus those every /v1 operation can
 * answer: 401 (authentication), 403 (the key's scopes), 429 (rate limit) and 500.
 */
export function problems(...statuses: number[]) {
  const all = [...new Set([...statuses, 401, 403, 429, 500])].sort((a, b) => a - b);
  return Object.fromEntries(
    all.map((status) => [
      status,
      {
        description: PROBLEM_DESCRIPTIONS[status] ?? "Problem details",
        ...(PROBLEM_HEADERS[status] && { headers: PROBLEM_HEADERS[status] }),
        content: { "application/problem+json": { schema: ref("Problem") } },
      },
    ]),
  );
}

/** Statuses a request with a JSON body may also get. */
export const BODY_PROBLEMS = [400, 413, 415, 422] as const;
