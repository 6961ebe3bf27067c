import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Counter, Gauge, type Registry } from "prom-client";
import { ReadAdmission, type ReadAdmissionLimits } from "./read-admission.ts";

/*
 * Where the API's reads meet the read admission (read-admission.ts): after the read cache, so that a response the
 * cache holds is sent at once, and before the work of computing one. REST reads (GET and HEAD under /v1/) wait
 * in preHandler, after authentication and the cache's preValidation hook. GraphQL reads wait in their route,
 * once the cache has missed (src/graphql/graphql-server.ts calls `holdGraphqlRead`), because the route
 * authenticates and answers cache hits itself, and only the document tells a query from a mutation. Everything
 * else passes untouched: writes, WebSocket upgrades (long-lived, they would hold a place for their whole life),
 * health checks, metrics and the explorer's assets.
 *
 * A read whose client closed its connection while the read waited is dropped when its turn comes, unrun: nobody
 * would receive its answer. Under a flood, clients that time out and go away otherwise leave their reads in the
 * queue, and the server spends its capacity on answers no one reads, ahead of the clients still waiting; at
 * shutdown such reads would also reach the GraphQL server after it stopped. `reftrail_reads_abandoned_total`
 * counts them.
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
  private readonly abandoned: Counter | null;

  constructor(limits: ReadAdmissionLimits, registry?: Registry) {
    const admission = new ReadAdmission(limits);
    this.admission = admission;
    this.abandoned = registry
      ? new Counter({
          name: "reftrail_reads_abandoned_total",
          help: "API reads dropped unrun because their client closed the connection while they waited for admission",
          registers: [registry],
        })
      : null;
    if (registry) {
      new Gauge({
        name: "reftrail_reads_waiting",
        help: "API reads waiting for admission",
        registers: [registry],
        collect() {
          this.set(admission.queued);
        },
      });
      new Gauge({
        name: "reftrail_reads_running",
        help: "API reads admitted and not yet answered",
        registers: [registry],
        collect() {
          this.set(admission.running);
        },
      });
    }
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

  /**
   * `next` runs once the read is admitted, or never when its client left meanwhile: the request then stays
   * unanswered, as nothing can answer it, and is collected with its connection.
   */
  private hold(reply: FastifyReply, next: () => void): void {
    this.admission.admit((done) => {
      if (reply.raw.destroyed && !reply.raw.writableFinished) {
        done();
        this.abandoned?.inc();
        return;
      }
      // "close" follows the response's end, and an aborted request's too: the place is always given back.
      if (reply.raw.writableFinished) done();
      else reply.raw.once("close", done);
      next();
    });
  }
}
