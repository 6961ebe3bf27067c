import type { FastifyBaseLogger } from "fastify";
import { changeBy, type ChangeContext } from "../domain/audit/audit-event.ts";
import type { Caller } from "../domain/organizations/organization-service.ts";
import type { Services } from "../domain/services.ts";
import type { OperationRequest } from "../pipeline/operation-request.ts";
import { createLoaders, type Loaders } from "./loaders.ts";

/** What every resolver gets: who is calling, the services, this request's loaders and its logger. */
export interface GraphqlContext {
  readonly caller: Caller;
  readonly services: Services;
  readonly loaders: Loaders;
  readonly log: FastifyBaseLogger;
  /** The request value the pipeline's stages read and write (src/pipeline/operation-request.ts). */
  readonly request: OperationRequest;
  /** The HTTP request's id (the audit log's `request_id`); absent over graphql-ws and SSE. */
  readonly requestId?: string;
}

/**
 * A fresh context with its own loaders, for a request the pipeline has authenticated (stage 1): every operation,
 * an introspection query included, needs a valid key.
 */
export function createGraphqlContext(
  services: Services,
  request: OperationRequest & { readonly caller: Caller },
  log: FastifyBaseLogger,
  requestId?: string,
): GraphqlContext {
  const caller = request.caller;
  return { caller, services, loaders: createLoaders(services, caller.organizationId), log, request, requestId };
}

/** Who makes a change through this operation, for the audit log: the caller's key, and the HTTP request's id. */
export function changeOf(context: Pick<GraphqlContext, "caller" | "requestId">): ChangeContext {
  return changeBy(context.caller, context.requestId ?? null);
}
