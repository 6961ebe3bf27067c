import type { FastifyBaseLogger } from "fastify";
import { authenticateHeaders, presentedApiKey } from "../authentication.ts";
import type { Caller } from "../domain/organizations/organization-service.ts";
import type { Services } from "../domain/services.ts";
import { unauthenticated } from "./errors.ts";
import { createLoaders, type Loaders } from "./loaders.ts";

/** What every resolver gets: who is calling, the services, this request's loaders and its logger. */
export interface GraphqlContext {
  readonly caller: Caller;
  readonly services: Services;
  readonly loaders: Loaders;
  readonly log: FastifyBaseLogger;
}

export interface ContextSource {
  readonly services: Services;
  /** HTTP headers, or graphql-ws `connectionParams` (same names: `x-api-key`, `authorization`). */
  readonly credentials: Record<string, unknown>;
  readonly log: FastifyBaseLogger;
}

/**
 * Authenticates the caller (SPEC §3) and builds a fresh context with its own loaders. Every operation, an
 * introspection query included, needs a valid key.
 * @throws a GraphQLError UNAUTHENTICATED (HTTP 401) for a missing, unknown or revoked key.
 */
export async function createGraphqlContext({ services, credentials, log }: ContextSource): Promise<GraphqlContext> {
  const caller = await authenticateHeaders(services, credentials);
  if (!caller) {
    throw unauthenticated(
      presentedApiKey(credentials) === null
        ? "Send an API key in X-API-Key or Authorization: Bearer"
        : "The API key is invalid or revoked",
    );
  }
  return { caller, services, loaders: createLoaders(services, caller.organizationId), log };
}
