import type { FastifyInstance, FastifyRequest } from "fastify";
import type { Caller } from "../domain/organizations/organization-service.ts";
import { splitPublishedCost } from "../pipeline/budget/cached-cost.ts";
import { refusesCachedResponse, type CachedCost, type CachedResponse, type ReadCache } from "../pipeline/read-cache/read-cache.ts";

declare module "fastify" {
  interface FastifyRequest {
    /** The GraphQL request's place in the read cache, while its response is being computed. */
    graphqlReadCache?: ReadCacheSlot;
  }
}

/** What the HTTP route and the plugin share about one request (see `readCachePlugin`). */
export interface ReadCacheSlot {
  /** The request's key in the read cache (read-cache.ts). */
  readonly key: string;
  /** Set by the plugin: the operation is a query (a mutation's lookup is not counted as a read that missed). */
  read: boolean;
  /** Set by the plugin: the response is a cacheable query's, without errors. */
  cacheable: boolean;
}

/**
 * The HTTP half of the GraphQL read cache (the plugin's comment in graphql-plugin.ts tells the whole). What
 * identifies a response within the caller's organization and read version: the method, the Accept header (it
 * picks the response's media type), and the operation as sent — query text, operation name, variables. A request
 * with `extensions` (automatic persisted queries) is not cached: its text may be absent.
 */
function operationKey(request: FastifyRequest): string | null {
  const source = (request.method === "GET" ? request.query : request.body) as Record<string, unknown> | null;
  if (typeof source !== "object" || source === null || Array.isArray(source)) return null;
  const { query, operationName, variables, extensions } = source;
  if (typeof query !== "string" || extensions !== undefined) return null;
  // A malformed operation name is Apollo's to refuse (400): it must not share the key of a request without one.
  if (operationName !== undefined && operationName !== null && typeof operationName !== "string") return null;
  // Every document is looked up, whatever its text says: only the parsed operation tells a query from a mutation,
  // and only a query's response is ever kept (graphql-plugin.ts), so a mutation never finds an entry. Its lookup
  // counts as a miss only once the plugin has seen a query.
  // GET carries variables as JSON text already; POST as a value, which may be too deep to serialize here: such
  // a request is refused by the variables guard anyway, so it is simply not cached.
  let variablesText: string;
  try {
    variablesText = typeof variables === "string" ? variables : JSON.stringify(variables ?? null);
  } catch {
    return null;
  }
  const name = typeof operationName === "string" ? operationName : null;
  // As JSON, so that no two requests can spell the same key.
  return `graphql ${JSON.stringify([request.method, request.headers.accept ?? null, name, variablesText, query])}`;
}

export class GraphqlReadCache {
  constructor(private readonly cache: ReadCache) {}

  /**
   * The kept response for the request of an authenticated `caller`, which the caller sends with its cost
   * (src/budget/cached-cost.ts); otherwise undefined, and the request's slot is prepared, for the plugin to mark
   * and for the onSend hook to fill.
   */
  find(request: FastifyRequest, caller: Caller): (CachedResponse & { readonly cost: CachedCost }) | undefined {
    // The header first: a request that refuses a cached answer is neither looked up nor kept, so its key (the
    // whole operation as JSON) is not worth building.
    if (refusesCachedResponse(request.headers["cache-control"])) return undefined;
    const operation = operationKey(request);
    if (operation === null) return undefined;
    const key = this.cache.keyOf(caller, operation);
    const hit = this.cache.findHit(key);
    // Every GraphQL entry carries its cost (only responses that published one are kept).
    if (hit?.cost) return hit as CachedResponse & { readonly cost: CachedCost };
    request.graphqlReadCache = { key, read: false, cacheable: false };
    return undefined;
  }

  /** Keeps the bytes of a response the plugin marked cacheable (registered on the GraphQL route's scope). */
  register(scope: FastifyInstance): void {
    scope.addHook("onSend", async (request, reply, payload) => {
      const slot = request.graphqlReadCache;
      if (slot?.read) this.cache.countMiss();
      const contentType = reply.getHeader("content-type");
      if (
        slot?.cacheable &&
        reply.statusCode === 200 &&
        typeof payload === "string" &&
        typeof contentType === "string"
      ) {
        // Kept up to its published cost, which a hit replaces with the caller's own (src/budget/cached-cost.ts).
        const split = splitPublishedCost(payload);
        if (split) this.cache.keep(slot.key, split.head, contentType, split.cost);
      }
      return payload;
    });
  }
}
