import type { ApiKeyScope } from "../../domain/organizations/api-key-scopes.ts";

/*
 * Which operation needs which scope (SPEC §3.1): the one table to read and to review. Every REST route under /v1
 * and every root field of the GraphQL schema must have a row; the server refuses to start with a route or a
 * root field that has none (src/rest/rest-api.ts, src/graphql/scope-guard.ts), so a new operation cannot ship
 * unguarded. `null` marks an operation any authenticated key may call (the event catalog, which is public
 * documentation).
 *
 * Writes need the write scope only: a `references:write` key (a tracking integration) may create a reference
 * and read the answer of its own write without `references:read`.
 */

/** REST routes, keyed `METHOD /v1/path` with Fastify's parameter syntax. */
export const REST_ROUTE_SCOPES: Readonly<Record<string, ApiKeyScope | null>> = {
  "GET /v1/event-types": null,

  "POST /v1/tags": "references:write",
  "GET /v1/tags": "references:read",
  "GET /v1/tags/:tagId": "references:read",
  "PATCH /v1/tags/:tagId": "references:write",
  "DELETE /v1/tags/:tagId": "references:write",
  "GET /v1/tags/:tagId/references": "references:read",
  "POST /v1/references": "references:write",
  "GET /v1/references": "references:read",
  "GET /v1/references/:referenceId": "references:read",
  "DELETE /v1/references/:referenceId": "references:write",
  "POST /v1/references/:referenceId/tags": "references:write",
  "DELETE /v1/references/:referenceId/tags/:tagId": "references:write",
  "GET /v1/references/:referenceId/events": "references:read",
  "POST /v1/references/:referenceId/deactivate": "references:write",
  "POST /v1/references/:referenceId/reactivate": "references:write",
  "POST /v1/references/:referenceId/extractions": "references:write",
  "POST /v1/references/:referenceId/updates": "references:write",
  "GET /v1/references/:referenceId/updates": "references:read",
  "GET /v1/references/:referenceId/updates/:updateId": "references:read",
  "POST /v1/references/:referenceId/children": "references:write",
  "POST /v1/ingestions": "references:write",
  "GET /v1/events": "references:read",

  "POST /v1/webhooks": "webhooks:write",
  "GET /v1/webhooks": "webhooks:read",
  "GET /v1/webhooks/:webhookId": "webhooks:read",
  "PATCH /v1/webhooks/:webhookId": "webhooks:write",
  "DELETE /v1/webhooks/:webhookId": "webhooks:write",
  "POST /v1/webhooks/:webhookId/rotate-secret": "webhooks:write",
  "POST /v1/webhooks/:webhookId/test": "webhooks:write",
  "GET /v1/webhooks/:webhookId/deliveries": "webhooks:read",
  "GET /v1/webhooks/:webhookId/deliveries/:deliveryId": "webhooks:read",
  "POST /v1/webhooks/:webhookId/deliveries/:deliveryId/resend": "webhooks:write",
  "GET /v1/webhooks/:webhookId/held-back": "webhooks:read",
  "POST /v1/webhooks/:webhookId/recover": "webhooks:write",
  "POST /v1/webhooks/:webhookId/replay": "webhooks:write",
  "GET /v1/webhooks/:webhookId/replay": "webhooks:read",

  "POST /v1/trusted-documents": "documents:write",
  "GET /v1/trusted-documents": "documents:read",
  "GET /v1/trusted-documents/:documentId": "documents:read",

  "POST /v1/api-keys": "keys:write",
  "GET /v1/api-keys": "keys:read",
  "GET /v1/api-keys/:keyId": "keys:read",
  "DELETE /v1/api-keys/:keyId": "keys:write",

  "GET /v1/audit-events": "audit:read",
};

/**
 * GraphQL root fields, keyed `Type.field`. Fields below the root need no row: a key reaches them only through a
 * root field it may call, except through `node`/`nodes`, which are checked by the type they resolve to
 * (NODE_TYPE_SCOPES).
 */
export const GRAPHQL_FIELD_SCOPES: Readonly<Record<string, ApiKeyScope | null>> = {
  "Query.tag": "references:read",
  "Query.tags": "references:read",
  "Query.reference": "references:read",
  "Query.references": "references:read",
  "Query.lifecycleEvents": "references:read",
  // Checked per resolved node (NODE_TYPE_SCOPES): the type decides.
  "Query.node": null,
  "Query.nodes": null,
  "Query.webhookEndpoints": "webhooks:read",
  "Query.webhookEndpoint": "webhooks:read",
  "Query.webhookDelivery": "webhooks:read",
  "Query.trustedDocuments": "documents:read",
  "Query.trustedDocument": "documents:read",
  "Query.apiKeys": "keys:read",
  "Query.apiKey": "keys:read",
  "Query.auditEvents": "audit:read",

  "Mutation.createTag": "references:write",
  "Mutation.renameTag": "references:write",
  "Mutation.deleteTag": "references:write",
  "Mutation.createReference": "references:write",
  "Mutation.addTagsToReference": "references:write",
  "Mutation.removeTagFromReference": "references:write",
  "Mutation.deactivateReference": "references:write",
  "Mutation.reactivateReference": "references:write",
  "Mutation.recordExtraction": "references:write",
  "Mutation.recordReferenceUpdate": "references:write",
  "Mutation.reportChildContainers": "references:write",
  "Mutation.ingest": "references:write",
  "Mutation.createWebhookEndpoint": "webhooks:write",
  "Mutation.updateWebhookEndpoint": "webhooks:write",
  "Mutation.deleteWebhookEndpoint": "webhooks:write",
  "Mutation.rotateWebhookEndpointSecret": "webhooks:write",
  "Mutation.sendTestWebhook": "webhooks:write",
  "Mutation.resendWebhookDelivery": "webhooks:write",
  "Mutation.recoverWebhookDeliveries": "webhooks:write",
  "Mutation.replayWebhookEvents": "webhooks:write",
  "Mutation.registerTrustedDocuments": "documents:write",
  "Mutation.createApiKey": "keys:write",
  "Mutation.revokeApiKey": "keys:write",

  "Subscription.lifecycleEvents": "references:read",
  "Subscription.webhookDeliveryAttempts": "webhooks:read",
};

/** The scope reading an object of each `Node` type needs, for `Query.node` and `Query.nodes`. */
export const NODE_TYPE_SCOPES: Readonly<Record<string, ApiKeyScope>> = {
  Tag: "references:read",
  Reference: "references:read",
  ReferenceUpdate: "references:read",
  LifecycleEvent: "references:read",
  WebhookEndpoint: "webhooks:read",
  WebhookDelivery: "webhooks:read",
  WebhookAttempt: "webhooks:read",
};

/** The scope a REST route needs; undefined when the table has no row for it (a route that must not exist). */
export function scopeOfRoute(method: string, url: string): ApiKeyScope | null | undefined {
  return REST_ROUTE_SCOPES[`${method} ${url}`];
}

/** Whether `scopes` covers what an operation needs (`null`: any key). */
export function allows(scopes: ReadonlySet<ApiKeyScope>, required: ApiKeyScope | null): boolean {
  return required === null || scopes.has(required);
}
