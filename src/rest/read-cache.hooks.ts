import type { FastifyInstance } from "fastify";
import { refusesCachedResponse, type ReadCache } from "../pipeline/read-cache/read-cache.ts";

declare module "fastify" {
  interface FastifyRequest {
    /** The read cache's key of this request's response, while it is being computed to be stored. */
    readCacheKey?: string;
  }
  interface FastifyContextConfig {
    /** A GET route whose 200 responses the read cache keeps: it shows only what the data version covers. */
    readCache?: boolean;
  }
}

/**
 * REST reads answered from the read cache (read-cache.ts): the routes that declare `readCache`
 * (cacheable-types.ts). The lookup runs after authentication (rest-api.ts's onRequest hook, which read the read
 * version), rate limiting (a route-level onRequest hook) and the input guards, and before schema validation: only
 * a 200 is kept, so the same URL was valid, and a hit sends the stored bytes at once.
 */
export function registerReadCache(app: FastifyInstance, cache: ReadCache): void {
  app.addHook("preValidation", async (request, reply) => {
    if (!request.routeOptions.config.readCache || !request.caller) return;
    if (refusesCachedResponse(request.headers["cache-control"])) return;
    const key = cache.keyOf(request.caller, `rest ${request.url}`);
    const hit = cache.find(key);
    if (hit === undefined) {
      request.readCacheKey = key;
      return;
    }
    return reply.type(hit.contentType).send(hit.body);
  });

  app.addHook("onSend", async (request, reply, payload) => {
    const contentType = reply.getHeader("content-type");
    if (
      request.readCacheKey !== undefined &&
      reply.statusCode === 200 &&
      (typeof payload === "string" || Buffer.isBuffer(payload)) &&
      typeof contentType === "string"
    ) {
      cache.keep(request.readCacheKey, payload, contentType);
    }
    return payload;
  });
}
