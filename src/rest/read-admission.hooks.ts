import type { FastifyInstance, FastifyRequest } from "fastify";
import type { ReadAdmissionGate } from "../pipeline/admission/read-admission-gate.ts";

function isRestRead(request: FastifyRequest): boolean {
  return (request.method === "GET" || request.method === "HEAD") && request.url.startsWith("/v1/");
}

/**
 * REST reads (GET and HEAD under /v1/) wait for their turn in the read admission before their handler runs, after
 * authentication and the read cache's lookup (preValidation), so that an answer the cache holds is sent at once.
 * Register before the routes; the server's accepted connections are counted too.
 */
export function registerReadAdmission(app: FastifyInstance, gate: ReadAdmissionGate): void {
  app.server.on("connection", () => gate.connectionAccepted());
  app.addHook("preHandler", (request, reply, next) => {
    if (isRestRead(request)) gate.hold(reply.raw, next, request.caller?.organizationId);
    else next();
  });
}
