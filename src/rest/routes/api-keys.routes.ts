import type { FastifyInstance } from "fastify";
import type { AuditEvent } from "../../domain/audit/audit-event.ts";
import { orderedScopes } from "../../domain/organizations/api-key-scopes.ts";
import type { ApiKeySummary } from "../../domain/organizations/organization-service.ts";
import type { Services } from "../../domain/services.ts";
import { scopeSchema } from "../api-key-schemas.ts";
import { callerOf, changeOf } from "../rest-api.ts";
import { BODY_PROBLEMS, noContent, problems, success } from "../response-schemas.ts";
import { idempotencyKeyHeader, pageQuery, uuidParam } from "../schemas.ts";

/*
 * API keys as their organization manages them, and the audit log (SPEC §3.1). The scope each route needs is in
 * the one table (src/pipeline/access/scopes.ts), checked before the handler runs.
 */

const tags = ["api-keys"];

export function serializeApiKey(key: ApiKeySummary) {
  return {
    id: key.id,
    name: key.name,
    prefix: key.keyPrefix,
    scopes: orderedScopes(key.scopes),
    expires_at: key.expiresAt?.toISOString() ?? null,
    trusted_documents_only: key.trustedDocumentsOnly,
    created_at: key.createdAt.toISOString(),
    last_used_at: key.lastUsedAt?.toISOString() ?? null,
    revoked_at: key.revokedAt?.toISOString() ?? null,
  };
}

export function serializeAuditEvent(event: AuditEvent) {
  return {
    id: event.id,
    occurred_at: event.occurredAt.toISOString(),
    action: event.action,
    actor:
      event.actor.kind === "cli" ? { cli: true } : { api_key_id: event.actor.apiKeyId, prefix: event.actor.prefix },
    target: event.target,
    changes: event.changes,
    request_id: event.requestId,
  };
}

interface CreateApiKeyBody {
  name: string;
  scopes: string[];
  expires_at?: string | null;
  trusted_documents_only?: boolean;
}

export function registerApiKeyRoutes(app: FastifyInstance, services: Services): void {
  app.post<{ Body: CreateApiKeyBody }>(
    "/api-keys",
    {
      schema: {
        tags,
        operationId: "createApiKey",
        summary: "Create an API key (the key is in this answer only)",
        description:
          "The new key holds only scopes the calling key holds itself (403 FORBIDDEN with `required_scope` " +
          "otherwise). `expires_at` must be in the future (422). Scope `keys:write`.",
        headers: idempotencyKeyHeader,
        body: {
          type: "object",
          properties: {
            name: { type: "string", description: "A label, 1-100 characters" },
            scopes: { type: "array", items: scopeSchema, minItems: 1, description: "What the key may do" },
            expires_at: { type: ["string", "null"], description: "ISO 8601; past it the key answers 401" },
            trusted_documents_only: {
              type: "boolean",
              description: "GraphQL requests with the key may run registered documents only",
            },
          },
          required: ["name", "scopes"],
          additionalProperties: false,
        },
        response: {
          201: success("The created key, with the key itself", "CreatedApiKey", { location: true, replayable: true }),
          ...problems(...BODY_PROBLEMS),
        },
      },
      config: { locationOf: (key: { id: string }) => `/v1/api-keys/${key.id}` },
    },
    async (request, reply) => {
      const { name, scopes, expires_at: expiresAt, trusted_documents_only: trustedDocumentsOnly } = request.body;
      const created = await services.apiKeys.createApiKey(callerOf(request), changeOf(request), {
        name,
        scopes,
        expiresAt,
        trustedDocumentsOnly,
      });
      return reply.code(201).send({ ...serializeApiKey(created.apiKey), key: created.key });
    },
  );

  app.get(
    "/api-keys",
    {
      schema: {
        tags,
        operationId: "listApiKeys",
        summary: "List the organization's API keys (never a key itself)",
        response: { 200: success("The organization's keys, oldest first", "ApiKeyList"), ...problems() },
      },
    },
    async (request) => {
      const keys = await services.apiKeys.listApiKeys(callerOf(request).organizationId);
      return { data: keys.map(serializeApiKey), next_cursor: null };
    },
  );

  app.get<{ Params: { keyId: string } }>(
    "/api-keys/:keyId",
    {
      schema: {
        tags,
        operationId: "getApiKey",
        summary: "Read one API key (never the key itself)",
        params: uuidParam("keyId", "The key's id"),
        response: { 200: success("The key", "ApiKey"), ...problems(404) },
      },
    },
    async (request) =>
      serializeApiKey(await services.apiKeys.getApiKey(callerOf(request).organizationId, request.params.keyId)),
  );

  app.delete<{ Params: { keyId: string } }>(
    "/api-keys/:keyId",
    {
      schema: {
        tags,
        operationId: "revokeApiKey",
        summary: "Revoke an API key: refused from its next request on, on every instance",
        params: uuidParam("keyId", "The key's id"),
        response: { 204: noContent("Revoked"), ...problems(404) },
      },
    },
    async (request, reply) => {
      await services.apiKeys.revokeApiKey(callerOf(request).organizationId, changeOf(request), request.params.keyId);
      return reply.code(204).send();
    },
  );

  app.get<{ Querystring: { limit: number; cursor?: string; action?: string; api_key_id?: string } }>(
    "/audit-events",
    {
      schema: {
        tags: ["audit"],
        operationId: "listAuditEvents",
        summary: "The organization's administrative changes, newest first",
        querystring: {
          type: "object",
          properties: {
            ...pageQuery,
            action: { type: "string", description: "Only this action (e.g. webhook_endpoint.updated)" },
            api_key_id: { type: "string", description: "Only changes made with this API key" },
          },
        },
        response: { 200: success("A page of audit events", "AuditEventPage"), ...problems(400, 422) },
      },
    },
    async (request) => {
      const page = await services.audit.listAuditEvents(callerOf(request).organizationId, {
        limit: request.query.limit,
        cursor: request.query.cursor,
        action: request.query.action,
        apiKeyId: request.query.api_key_id,
      });
      return { data: page.items.map(serializeAuditEvent), next_cursor: page.nextCursor };
    },
  );
}
