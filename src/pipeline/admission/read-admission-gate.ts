import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { Counter, Gauge, type Registry } from "prom-client";
import { ReadAdmission, type ReadAdmissionLimits } from "./read-admission.ts";

/*
 * Where the API's reads meet the read admission (read-admission.ts): after the read cache, so that a response the
 * cache holds is sent at once, and before the work of computing one. REST reads (GET and HEAD under /v1/) wait
 * in preHandler, after authentication and the cache's preValidation hook. GraphQL queries wait in Apollo's
 * pipeline, just before execution (graphql-plugin.ts): only the parsed document, and the operation its request
 * selects, tells a query from a mutation, and Apollo parses it once (or finds it parsed already). Everything else
 * passes untouched: mutations, WebSocket upgrades (long-lived, they would hold a place for their whole life),
 * health checks, metrics and the explorer's assets.
 *
 * A read whose client closed its connection while the read waited is dropped when its turn comes, unrun: nobody
 * would receive its answer. Under a flood, clients that time out and go away otherwise leave their reads in the
 * queue, and the server spends its capacity on answers no one reads, ahead of the clients still waiting; at
 * shutdown such reads would also reach the GraphQL server after it stopped. `reftrail_reads_abandoned_total`
 * counts them.
 */

/** The place each admitted REST read holds, by its reply, until the response closes or the route gives it back. */
const placesHeld = new WeakMap<FastifyReply, () => void>();

/**
 * Gives back the place an admitted read holds, before its response is sent: for a read that goes on to wait
 * without using the database (a long poll of `GET /v1/events`), which would otherwise hold a place for its whole
 * wait and keep other reads out. Does nothing for a request that holds none.
 */
export function releaseReadAdmission(reply: FastifyReply): void {
  placesHeld.get(reply)?.();
  placesHeld.delete(reply);
}

function isRestRead(request: FastifyRequest): boolean {
  return (request.method === "GET" || request.method === "HEAD") && request.url.startsWith("/v1/");
}

export class ReadAdmissionGate {
  private readonly admission: ReadAdmission;
  private readonly abandoned: Counter | null;
  private readonly admitted: Counter | null;

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
    this.admitted = registry
      ? new Counter({
          name: "reftrail_reads_admitted_total",
          help: "API reads admitted to run: REST reads and GraphQL queries the read cache did not answer",
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

  /** Reads waiting for admission now (the webhook worker's backlog yields to them: src/webhooks/reads-first.ts). */
  get readsWaiting(): number {
    return this.admission.queued;
  }

  /** Holds REST reads (call before the routes are registered), and hears of the connections accepted. */
  register(app: FastifyInstance): void {
    app.server.on("connection", () => this.admission.connectionAccepted());
    app.addHook("preHandler", (request, reply, next) => {
      if (isRestRead(request)) this.hold(reply, next);
      else next();
    });
  }

  /**
   * Resolves once the read that `reply` answers may run (a GraphQL query, told by graphql-plugin.ts); never when
   * its client left meanwhile.
   */
  holdRead(reply: FastifyReply): Promise<void> {
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
      else {
        reply.raw.once("close", done);
        // Giving the place back twice is harmless: the admission counts each place once.
        placesHeld.set(reply, done);
      }
      this.admitted?.inc();
      next();
    });
  }
}
