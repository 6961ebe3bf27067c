import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Tracer,
} from "@opentelemetry/api";
import {
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
} from "@opentelemetry/semantic-conventions";
import type { FastifyInstance, FastifyRequest } from "fastify";

/*
 * One span per HTTP request (kind server), in the trace its `traceparent` header names, if any, named after the
 * route that matched (`POST /graphql`, `GET /v1/references/:referenceId`). It ends when the response closes: sent, or cut
 * short by the client.
 *
 * The span is made active twice, by calling Fastify's `done` inside it: when the request arrives (onRequest), and
 * again right before the handler (preHandler), because what runs between may continue in another context — the
 * body is parsed in the socket's `data` callbacks, and a REST read held by the read admission is let go from the
 * admission's own turn. The http instrumentation binds the request's and response's emitters instead, which
 * wraps every listener Fastify adds to them: measured, that was a cost of its own on every request.
 */

/** The context of each request in flight, its span active. */
const requestContexts = new WeakMap<FastifyRequest, Context>();

function startRequestSpan(tracer: Tracer, request: FastifyRequest): Context {
  const parent = propagation.extract(ROOT_CONTEXT, request.headers);
  const { method, url } = request.raw;
  const route = request.routeOptions.url;
  const query = url?.indexOf("?") ?? -1;
  const span = tracer.startSpan(
    route === undefined ? method! : `${method} ${route}`,
    {
      kind: SpanKind.SERVER,
      attributes: {
        [ATTR_HTTP_REQUEST_METHOD]: method,
        // The path only: a query string may carry values a trace must not keep.
        [ATTR_URL_PATH]: query === -1 ? url : url!.slice(0, query),
        [ATTR_URL_SCHEME]: "http",
        ...(route === undefined ? {} : { [ATTR_HTTP_ROUTE]: route }),
      },
    },
    parent,
  );
  return trace.setSpan(parent, span);
}

/**
 * Makes every request `http` serves a span of `tracer`. Call after the hooks that may hold a request before its
 * handler (the read admission's), so that the span is made active again after them.
 */
export function traceHttpRequests(http: FastifyInstance, tracer: Tracer): void {
  http.addHook("onRequest", (request, reply, done) => {
    const active = startRequestSpan(tracer, request);
    requestContexts.set(request, active);
    const span = trace.getSpan(active)!;
    reply.raw.once("close", () => {
      span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, reply.raw.statusCode);
      if (reply.raw.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    context.with(active, done);
  });
  http.addHook("preHandler", (request, _reply, done) => {
    const active = requestContexts.get(request);
    if (active) context.with(active, done);
    else done();
  });
}
