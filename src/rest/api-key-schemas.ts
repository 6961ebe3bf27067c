import { API_KEY_SCOPES } from "../domain/organizations/api-key-scopes.ts";
import { AUDIT_ACTIONS } from "../domain/audit/audit-event.ts";
import { dateTime, freeForm, nullableDateTime, record, uuid } from "./response-schema-parts.ts";

/* The API key and audit event components of the /v1 response schemas (routes/api-keys.routes.ts). */

export const scopeSchema = { type: "string", enum: [...API_KEY_SCOPES] } as const;

const apiKeyProperties = {
  id: uuid,
  name: { type: "string", description: "The label given at creation (empty for keys made by the CLI)" },
  prefix: { type: "string", description: "The key's first 8 characters: enough to recognize it, too few to use it" },
  scopes: { type: "array", items: scopeSchema, description: "What the key may do" },
  expires_at: { ...nullableDateTime, description: "Past this time the key answers 401; null: never" },
  trusted_documents_only: {
    type: "boolean",
    description: "GraphQL requests with the key run registered documents only",
  },
  created_at: dateTime,
  last_used_at: { ...nullableDateTime, description: "When the key was last used, to the minute; null: never" },
  revoked_at: { ...nullableDateTime, description: "When the key was revoked; null while it works" },
};

export const API_KEY_SCHEMAS = [
  { $id: "ApiKey", ...record("An API key as listed: never the key itself", apiKeyProperties) },
  {
    $id: "CreatedApiKey",
    ...record("A new API key, with the key itself: shown this once, never again", {
      ...apiKeyProperties,
      key: { type: "string", description: "The key. Store it now: it cannot be read again" },
    }),
  },
  {
    $id: "ApiKeyList",
    ...record("The organization's API keys, oldest first (revoked ones included)", {
      data: { type: "array", items: { $ref: "ApiKey#" } },
      next_cursor: { type: "null", description: "Always null: the list is whole" },
    }),
  },
  {
    $id: "AuditEvent",
    ...record("An administrative change", {
      id: uuid,
      occurred_at: dateTime,
      action: { type: "string", enum: [...AUDIT_ACTIONS] },
      actor: {
        type: "object",
        description: "`{ api_key_id, prefix }` for a change made with an API key; `{ cli: true }` for the CLI",
        properties: { api_key_id: uuid, prefix: { type: "string" }, cli: { type: "boolean" } },
        additionalProperties: false,
      },
      target: record("What was changed", { type: { type: "string" }, id: { type: "string" } }),
      changes: {
        ...freeForm,
        description: "Each changed field: `{ from, to }`. URLs masked as reads show them; never a secret or a key",
      },
      request_id: { type: ["string", "null"], description: "The request that made the change; null for the CLI" },
    }),
  },
  {
    $id: "AuditEventPage",
    ...record("A page of audit events, newest first", {
      data: { type: "array", items: { $ref: "AuditEvent#" } },
      next_cursor: {
        type: ["string", "null"],
        description: "Pass as `cursor` to read the next page; null on the last page",
      },
    }),
  },
] as const;
