import type { ServerResponse } from "node:http";
import { Counter, Gauge, type Registry } from "prom-client";
import { ReadAdmission, type ReadAdmissionLimits } from "./read-admission.ts";

/*
 * Where the API's reads meet the read admission (read-admission.ts): after the read cache, so that a response the
 * cache holds is sent at once, and before the work of computing one. REST reads (GET and HEAD under /v1/) wait
 * before their handler (src/rest/read-admission.hooks.ts); GraphQL queries wait in the pipeline's admit stage,
 * once the document is prepared and the operation charged (src/pipeline/graphql-pipeline.ts): only the parsed
 * document tells a query from a mutation. Everything else passes untouched: mutations, WebSocket upgrades
 * (long-lived, they would hold a place for their whole life), health checks, metrics and the explorer's assets.
 * A read is held by the HTTP response that will answer it (Node's, whatever the framework).
 *
 * A read whose client closed its connection while the read waited is dropped when its turn comes, unrun: nobody
 * would receive its answer. Under a flood, clients that time out and go away otherwise leave their reads in the
 * queue, and the server spends its capacity on answers no one reads, ahead of the clients still waiting; at
 * shutdown such reads would also reach the GraphQL server after it stopped. `reftrail_reads_abandoned_total`
 * counts them.
 */

/** The place each admitted read holds, by its response, until the response closes or the route gives it back. */
const placesHeld = new WeakMap<ServerResponse, () => void>();

/**
 * Gives back the place an admitted read holds, before its response is sent: for a read that goes on to wait
 * without using the database (a long poll of `GET /v1/events`), which would otherwise hold a place for its whole
 * wait and keep other reads out. Does nothing for a request that holds none.
 */
export function releaseReadAdmission(response: ServerResponse): void {
  placesHeld.get(response)?.();
  placesHeld.delete(response);
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

  /** A connection was accepted (the admission sizes its turns by the connections it sees). */
  connectionAccepted(): void {
    this.admission.connectionAccepted();
  }

  /**
   * Resolves once the read that `response` answers may run; never when its client left meanwhile. `organizationId`:
   * whose turn it waits for (reads wait per organization, read-admission.ts).
   */
  holdRead(response: ServerResponse, organizationId?: string): Promise<void> {
    return new Promise((resolve) => this.hold(response, resolve, organizationId));
  }

  /**
   * `next` runs once the read is admitted, or never when its client left meanwhile: the request then stays
   * unanswered, as nothing can answer it, and is collected with its connection.
   */
  hold(response: ServerResponse, next: () => void, organizationId?: string): void {
    this.admission.admit((done) => {
      if (response.destroyed && !response.writableFinished) {
        done();
        this.abandoned?.inc();
        return;
      }
      // "close" follows the response's end, and an aborted request's too: the place is always given back.
      if (response.writableFinished) done();
      else {
        response.once("close", done);
        // Giving the place back twice is harmless: the admission counts each place once.
        placesHeld.set(response, done);
      }
      this.admitted?.inc();
      next();
    }, organizationId);
  }
}
