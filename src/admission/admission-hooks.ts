import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { ReadAdmission, type ReadAdmissionLimits } from "./read-admission.ts";

/*
 * Where the API's reads meet the read admission (read-admission.ts): after the read cache, so that a response the
 * cache holds is sent at once, and before the work of computing one. REST reads (GET and HEAD under /v1/) wait
 * in preHandler, after authentication and the cache's preValidation hook. GraphQL reads wait in their route,
 * once the cache has missed (src/graphql/graphql-server.ts calls `holdGraphqlRead`), because the route
 * authenticates and answers cache hits itself, and only the document tells a query from a mutation. Everything
 * else passes untouched: writes, WebSocket upgrades (long-lived, they would hold a place for their whole life),
 * health checks, metrics and the explorer's assets.
 */

/**
 * A mutation, told from the document's text without parsing it: any `mutation` keyword counts. A query that
 * merely mentions the word passes as a write, which only means it is not held; nothing else depends on it.
 */
const MUTATION_KEYWORD = /\bmutation\b/;

function isRestRead(request: FastifyRequest): boolean {
  return (request.method === "GET" || request.method === "HEAD") && request.url.startsWith("/v1/");
}

function isGraphqlRead(request: FastifyRequest): boolean {
  if (request.headers.upgrade !== undefined) return false;
  if (request.method === "GET") return true;
  const body = request.body as { query?: unknown } | undefined;
  return typeof body?.query !== "string" || !MUTATION_KEYWORD.test(body.query);
}

export class ReadAdmissionGate {
  private readonly admission: ReadAdmission;

  constructor(limits: ReadAdmissionLimits) {
    this.admission = new ReadAdmission(limits);
  }

  /** Holds REST reads (call before the routes are registered), and hears of the connections accepted. */
  register(app: FastifyInstance): void {
    app.server.on("connection", () => this.admission.connectionAccepted());
    app.addHook("preHandler", (request, reply, next) => {
      if (isRestRead(request)) this.hold(reply, next);
      else next();
    });
  }

  /** Resolves once a GraphQL request may run: at once for a mutation, after admission for a query. */
  holdGraphqlRead(request: FastifyRequest, reply: FastifyReply): Promise<void> | undefined {
    if (!isGraphqlRead(request)) return undefined;
    return new Promise((resolve) => this.hold(reply, resolve));
  }

  private hold(reply: FastifyReply, next: () => void): void {
    this.admission.admit((done) => {
      // "close" follows the response's end, and an aborted request's too: the place is always given back.
      if (reply.raw.writableFinished || reply.raw.destroyed) done();
      else reply.raw.once("close", done);
      next();
    });
  }
}
