import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from "fastify";
import { ReadAdmission, type ReadAdmissionLimits } from "./read-admission.ts";

/*
 * Where the API's requests meet the read admission (read-admission.ts). REST reads (GET and HEAD under /v1/)
 * wait right after routing, before authentication, so that a held read has cost nothing but its parse. GraphQL
 * requests wait once their body is parsed (preHandler), because only the document tells a query from a
 * mutation. Everything else passes untouched: writes, WebSocket upgrades (long-lived, they would hold a place for
 * their whole life), health checks, metrics and the explorer's assets.
 */

const GRAPHQL_PATH = "/graphql";

/**
 * A mutation, told from the document's text without parsing it: any `mutation` keyword counts. A query that
 * merely mentions the word passes as a write, which only means it is not held; nothing else depends on it.
 */
const MUTATION_KEYWORD = /\bmutation\b/;

function pathOf(request: FastifyRequest): string {
  const query = request.url.indexOf("?");
  return query === -1 ? request.url : request.url.slice(0, query);
}

function isRestRead(request: FastifyRequest): boolean {
  return (request.method === "GET" || request.method === "HEAD") && pathOf(request).startsWith("/v1/");
}

function isGraphqlRead(request: FastifyRequest): boolean {
  if (pathOf(request) !== GRAPHQL_PATH || request.headers.upgrade !== undefined) return false;
  if (request.method === "GET") return true;
  if (request.method !== "POST") return false;
  const body = request.body as { query?: unknown } | undefined;
  return typeof body?.query !== "string" || !MUTATION_KEYWORD.test(body.query);
}

/** Holds the API's reads for admission (see read-admission.ts); call before the routes' own hooks. */
export function registerReadAdmission(app: FastifyInstance, limits: ReadAdmissionLimits): ReadAdmission {
  const admission = new ReadAdmission(limits);
  const hold = (reply: FastifyReply, next: HookHandlerDoneFunction) =>
    admission.admit((done) => {
      // "close" follows the response's end, and an aborted request's too: the place is always given back.
      if (reply.raw.writableFinished || reply.raw.destroyed) done();
      else reply.raw.once("close", done);
      next();
    });
  app.addHook("onRequest", (request, reply, next) => {
    if (isRestRead(request)) hold(reply, next);
    else next();
  });
  app.addHook("preHandler", (request, reply, next) => {
    if (isGraphqlRead(request)) hold(reply, next);
    else next();
  });
  return admission;
}
