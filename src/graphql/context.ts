import type { Context as TraceContext } from "@opentelemetry/api";
import type { FastifyBaseLogger } from "fastify";
import { authenticateHeaders, presentedApiKey } from "../authentication.ts";
import type { Caller } from "../domain/organizations/organization-service.ts";
import type { Services } from "../domain/services.ts";
import { unauthenticated } from "../pipeline/errors/graphql-errors.ts";
import { createLoaders, type Loaders } from "./loaders.ts";
import type { ReadCacheSlot } from "../read-cache/graphql-http.ts";
import type { OperationCostSlot } from "../budget/graphql-plugin.ts";

/** What every resolver gets: who is calling, the services, this request's loaders and its logger. */
export interface GraphqlContext {
  readonly caller: Caller;
  readonly services: Services;
  readonly loaders: Loaders;
  readonly log: FastifyBaseLogger;
  /** Over HTTP, when the response may be kept by the read cache (src/read-cache/graphql-plugin.ts). */
  readonly readCacheSlot?: ReadCacheSlot;
  /** Over HTTP: waits for a query's turn in the read admission (src/admission/graphql-plugin.ts). */
  readonly holdRead?: () => Promise<void>;
  /** Over HTTP: the request's estimated cost and its charge to the caller's budget (src/budget/graphql-plugin.ts). */
  readonly operationCost?: OperationCostSlot;
  /** Over HTTP, when traces are on: the request's trace context, the parent of the operation's span. */
  readonly traceParent?: TraceContext;
}

export interface ContextSource {
  readonly services: Services;
  /** HTTP headers, or graphql-ws `connectionParams` (same names: `x-api-key`, `authorization`). */
  readonly credentials: Record<string, unknown>;
  readonly log: FastifyBaseLogger;
  /** The caller, when the transport has authenticated the credentials already. */
  readonly caller?: Caller;
  readonly readCacheSlot?: ReadCacheSlot;
  readonly holdRead?: () => Promise<void>;
  readonly operationCost?: OperationCostSlot;
  readonly traceParent?: TraceContext;
}

/**
 * Authenticates the caller and builds a fresh context with its own loaders. Every operation, an
 * introspection query included, needs a valid key.
 * @throws a GraphQLError UNAUTHENTICATED (HTTP 401) for a missing, unknown or revoked key.
 */
export async function createGraphqlContext(source: ContextSource): Promise<GraphqlContext> {
  const { services, credentials, log, readCacheSlot, holdRead, operationCost, traceParent } = source;
  const caller = source.caller ?? (await authenticateHeaders(services, credentials));
  if (!caller) {
    throw unauthenticated(
      presentedApiKey(credentials) === null
        ? "Send an API key in X-API-Key or Authorization: Bearer"
        : "The API key is invalid or revoked",
    );
  }
  const loaders = createLoaders(services, caller.organizationId);
  return { caller, services, loaders, log, readCacheSlot, holdRead, operationCost, traceParent };
}
