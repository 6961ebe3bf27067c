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
 * The span is made active right before the handler (preHandler), by calling Fastify's `done` inside it, so that the
 * handler's statements are its children; what runs before (body parsing in the socket's `data` callbacks, the
 * onRequest hooks, a REST read held by the read admission and let go from the admission's own turn) is in no
 * request's context, and the API key's lookup, asked for in REST's onRequest hook, is shared by the requests of a
 * turn. The routes that pass the context on themselves are left as they are: the GraphQL route makes its operation
 * span active while the operation executes, as a child of this one (graphql-spans.ts), and Apollo's pipeline around
 * execution runs in the root context. The http instrumentation binds the request's and response's emitters
 * instead, which wraps every listener Fastify adds to them: measured, that was a cost of its own on every request.
 */

/** The context of each request in flight, its span active. */
const requestContexts = new WeakMap<FastifyRequest, Context>();
/** The requests whose context is made active before their handler (not on the routes that pass it on). */
const activeInHandler = new WeakSet<FastifyRequest>();

/** The trace context of `request`'s span, when traces are on; for a route that passes it on itself. */
export function requestTraceContext(request: FastifyRequest): Context | undefined {
  return requestContexts.get(request);
}

const SERVER_SPAN_OPTIONS = { kind: SpanKind.SERVER } as const;

function startRequestSpan(tracer: Tracer, request: FastifyRequest, route: string | undefined): Context {
  const parent = propagation.extract(ROOT_CONTEXT, request.headers);
  // Always set on a request a server received (the type is shared with client requests).
  const method = request.raw.method!;
  const url = request.raw.url!;
  const query = url.indexOf("?");
  // Attributes set on the started span, not given to `startSpan`: see src/store/sql/traced-executor.ts.
  const span = tracer
    .startSpan(route === undefined ? method : `${method} ${route}`, SERVER_SPAN_OPTIONS, parent)
    .setAttribute(ATTR_HTTP_REQUEST_METHOD, method)
    // The path only: a query string may carry values a trace must not keep.
    .setAttribute(ATTR_URL_PATH, query === -1 ? url : url.slice(0, query))
    .setAttribute(ATTR_URL_SCHEME, "http");
  if (route !== undefined) span.setAttribute(ATTR_HTTP_ROUTE, route);
  return trace.setSpan(parent, span);
}

/**
 * Makes every request `http` serves a span of `tracer`, active in its handler except on `routesPassingContextOn`
 * (route URLs as registered). Call after the hooks that may hold a request before its handler (the read
 * admission's), so that the span is made active after them.
 */
export function traceHttpRequests(
  http: FastifyInstance,
  tracer: Tracer,
  routesPassingContextOn: ReadonlySet<string> = new Set(),
): void {
  http.addHook("onRequest", (request, reply, done) => {
    // A getter that builds an object on each call: read once.
    const route = request.routeOptions.url;
    const active = startRequestSpan(tracer, request, route);
    requestContexts.set(request, active);
    if (route === undefined || !routesPassingContextOn.has(route)) activeInHandler.add(request);
    const span = trace.getSpan(active)!;
    reply.raw.once("close", () => {
      span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, reply.raw.statusCode);
      if (reply.raw.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    done();
  });
  http.addHook("preHandler", (request, _reply, done) => {
    if (activeInHandler.has(request)) context.with(requestContexts.get(request)!, done);
    else done();
  });
}
