import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Span,
  type Tracer,
} from "@opentelemetry/api";
import {
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_URL_PATH,
  ATTR_URL_SCHEME,
} from "@opentelemetry/semantic-conventions";
import type { FastifyInstance } from "fastify";
import type { IncomingMessage, ServerResponse } from "node:http";

/*
 * One span per HTTP request (kind server), in the trace its `traceparent` header names, if any. The span wraps
 * Fastify's whole handling of the request: the server's request listener runs inside the span's context, and the
 * request and response emitters are bound to it, so that body parsing (a `data` listener runs in the socket's
 * context, not the listener's) and everything after it (hooks, the route, Apollo, the store's statements) see it
 * as the active span. It ends when the response closes: sent, or cut short by the client.
 */

type RequestListener = (request: IncomingMessage, response: ServerResponse) => void;

/** The request spans open, by the raw request: Fastify's onRequest hook names them after their route. */
const openSpans = new WeakMap<IncomingMessage, Span>();

/** Starts the request's span; returns the context in which the request is handled, with the span active. */
function startRequestSpan(tracer: Tracer, request: IncomingMessage, response: ServerResponse): Context {
  const parent = propagation.extract(ROOT_CONTEXT, request.headers);
  const method = request.method ?? "GET";
  const url = request.url ?? "/";
  const query = url.indexOf("?");
  const span = tracer.startSpan(
    method,
    {
      kind: SpanKind.SERVER,
      attributes: {
        [ATTR_HTTP_REQUEST_METHOD]: method,
        // The path only: a query string may carry values a trace must not keep.
        [ATTR_URL_PATH]: query === -1 ? url : url.slice(0, query),
        [ATTR_URL_SCHEME]: "http",
      },
    },
    parent,
  );
  openSpans.set(request, span);
  response.once("close", () => {
    span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, response.statusCode);
    if (response.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  });
  return trace.setSpan(parent, span);
}

/**
 * Makes every request `http` serves a span of `tracer`. Call before the routes are registered (the hook names the
 * span after the route that matched: `GET /v1/references/:id`, `POST /graphql`).
 */
export function traceHttpRequests(http: FastifyInstance, tracer: Tracer): void {
  const listeners = http.server.listeners("request") as RequestListener[];
  http.server.removeAllListeners("request");
  for (const listener of listeners) {
    http.server.on("request", (request: IncomingMessage, response: ServerResponse) => {
      const active = startRequestSpan(tracer, request, response);
      context.bind(active, request);
      context.bind(active, response);
      context.with(active, listener, undefined, request, response);
    });
  }
  http.addHook("onRequest", (request, _reply, done) => {
    const span = openSpans.get(request.raw);
    const route = request.routeOptions.url;
    if (span && route !== undefined) {
      span.setAttribute(ATTR_HTTP_ROUTE, route);
      span.updateName(`${request.method} ${route}`);
    }
    done();
  });
}
