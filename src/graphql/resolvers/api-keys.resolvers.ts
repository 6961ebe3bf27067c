import { orderedScopes } from "../../domain/organizations/api-key-scopes.ts";
import { DomainError } from "../../domain/shared/errors.ts";
import type { Resolvers } from "../__generated__/resolvers-types.ts";
import { changeOf } from "../context.ts";
import { forwardPage, toConnection } from "../pagination.ts";

/*
 * API keys as their organization manages them, and the audit log (SPEC §3.1). The scope each field needs is in
 * the one table (src/pipeline/access/scopes.ts), checked before these resolvers run.
 */

export const apiKeyResolvers: Resolvers = {
  Query: {
    apiKeys: (_, _args, { caller, services }) => services.apiKeys.listApiKeys(caller.organizationId),
    apiKey: async (_, { id }, { caller, services }) => {
      try {
        return await services.apiKeys.getApiKey(caller.organizationId, id);
      } catch (error) {
        if (error instanceof DomainError && error.code === "NOT_FOUND") return null;
        throw error;
      }
    },
    auditEvents: async (_, args, { caller, services }) =>
      toConnection(
        await services.audit.listAuditEvents(caller.organizationId, {
          ...forwardPage(args),
          action: args.filter?.action ?? undefined,
          apiKeyId: args.filter?.apiKeyId ?? undefined,
        }),
      ),
  },
  Mutation: {
    createApiKey: async (_, { input }, context) => {
      const created = await context.services.apiKeys.createApiKey(context.caller, changeOf(context), {
        name: input.name,
        scopes: input.scopes,
        expiresAt: input.expiresAt ?? undefined,
        trustedDocumentsOnly: input.trustedDocumentsOnly ?? undefined,
      });
      return { apiKey: created.apiKey, key: created.key };
    },
    revokeApiKey: async (_, { id }, context) => {
      const { caller, services } = context;
      await services.apiKeys.revokeApiKey(caller.organizationId, changeOf(context), id);
      return { apiKey: await services.apiKeys.getApiKey(caller.organizationId, id) };
    },
  },
  ApiKey: {
    prefix: (key) => key.keyPrefix,
    scopes: (key) => orderedScopes(key.scopes),
  },
  AuditEvent: {
    actorApiKeyId: (event) => (event.actor.kind === "api_key" ? event.actor.apiKeyId : null),
    actorKeyPrefix: (event) => (event.actor.kind === "api_key" ? event.actor.prefix : null),
    actorCli: (event) => event.actor.kind === "cli",
    targetType: (event) => event.target.type,
    targetId: (event) => event.target.id,
    changes: (event) => ({ ...event.changes }),
  },
};
