import { SerializerSelector } from "@fastify/fast-json-stringify-compiler";
import fastifySwagger from "@fastify/swagger";
import rateLimit from "@fastify/rate-limit";
import { Ajv, type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";
import { createHash } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { authenticateHeaders, presentedApiKey } from "../pipeline/access/authentication.ts";
import { scopeOfRoute } from "../pipeline/access/scopes.ts";
import type { Config } from "../config.ts";
import { changeBy, type ChangeContext } from "../domain/audit/audit-event.ts";
import type { Caller } from "../domain/organizations/organization-service.ts";
import type { CostBudgetService } from "../domain/budgets/cost-budget-service.ts";
import type { Services } from "../domain/services.ts";
import type { Clock } from "../domain/shared/clock.ts";
import { DomainError, forbiddenScope } from "../domain/shared/errors.ts";
import type { IdempotencyStore } from "../domain/idempotency/idempotency-store.ts";
import { CompiledLater } from "./compiled-later.ts";
import { registerIdempotency } from "./idempotency.ts";
import { registerInputGuards } from "./input-guards.ts";
import { registerReadCache } from "./read-cache.hooks.ts";
import { registerRestCostBudget } from "./cost-budget.hooks.ts";
import type { ReadCache } from "../pipeline/read-cache/read-cache.ts";
import { openApiWebhooks } from "./openapi-webhooks.ts";
import { problem, sendProblem, toProblem } from "./problem.ts";
import { registerResponseSchemas } from "./response-schemas.ts";

declare module "fastify" {
  interface FastifyRequest {
    /** The /v1 request's authenticated caller (the pipeline's authenticate stage, run in onRequest). */
    caller?: Caller;
  }
  interface FastifyContextConfig {
    /** For a route that creates a resource: its path, from the response body, sent as `Location` with the 201. */
    locationOf?: (body: never) => string;
  }
}

/** Registers one group of /v1 routes (tags, references…) on the prefixed scope. */
export type RouteGroup = (v1: FastifyInstance, services: Services) => void;

export interface RestDependencies {
  readonly services: Services;
  readonly config: Config;
  readonly idempotency: IdempotencyStore;
  readonly clock: Clock;
  /** Recognizes an error that means the database is unreachable right now (answered 503, not 500). */
  readonly isServiceUnavailable: (error: unknown) => boolean;
  readonly readCache: ReadCache;
  /**
   * The route groups under /v1 (src/rest/routes/route-groups.ts). Passed in rather than imported: the routes
   * import `callerOf` from this file, and this file imports no route back.
   */
  readonly routeGroups: readonly RouteGroup[];
  /** What charges each /v1 request; null only on the bench's "budget off" server (src/app.ts, `withoutCostBudget`). */
  readonly budgets: CostBudgetService | null;
}

/** Paths that answer without an API key (the operations endpoints, the OpenAPI document, the explorer page). */
function isPublicPath(url: string): boolean {
  const path = url.split("?")[0]!;
  return path === "/healthz" || path === "/readyz" || path === "/metrics" || path === "/v1/openapi.json";
}

/**
 * The REST compatibility shim under /v1: thin routes over the domain services, problem+json
 * errors, API-key authentication, rate limiting, Idempotency-Key, and the OpenAPI document.
 */
export async function registerRest(
  app: FastifyInstance,
  { services, config, idempotency, clock, isServiceUnavailable, readCache, routeGroups, budgets }: RestDependencies,
): Promise<void> {
  const addFormatsPlugin = addFormats as unknown as (ajv: Ajv) => Ajv;
  const bodyAjv = addFormatsPlugin(
    new Ajv({ allErrors: true, coerceTypes: false, removeAdditional: false, useDefaults: true, strict: false }),
  );
  const queryAjv = addFormatsPlugin(
    new Ajv({ allErrors: false, coerceTypes: "array", removeAdditional: false, useDefaults: true, strict: false }),
  );
  // Each route's validators and serializers are compiled after the start, on the route's first request or in
  // the background once the server listens (compiled-later.ts).
  const compiledLater = new CompiledLater();
  app.addHook("onListen", function compileRoutesInBackground(done) {
    void compiledLater.compileInBackground();
    done();
  });
  app.addHook("onClose", function stopCompilingRoutes(_instance, done) {
    compiledLater.stop();
    done();
  });
  app.setValidatorCompiler(({ schema, httpPart }) =>
    validatorCompiledLater(compiledLater.add(() => (httpPart === "body" ? bodyAjv : queryAjv).compile(schema))),
  );

  // Bodies are JSON only: without this, Fastify's built-in text/plain parser would hand a string to the
  // validators and a wrong content type would look like a validation failure instead of a 415.
  app.removeContentTypeParser("text/plain");
  app.setErrorHandler((error, request, reply) => sendProblem(reply, toProblem(error, request, isServiceUnavailable)));
  app.setNotFoundHandler((request, reply) =>
    sendProblem(reply, problem(404, "NOT_FOUND", `No route for ${request.method} ${request.url.split("?")[0]}`)),
  );

  registerResponseSchemas(app);
  // Many responses share one schema (every problem response is `Problem`, many bodies are `Reference`):
  // compile each distinct schema once instead of once per route and status, which keeps startup short.
  const compileSerializer = SerializerSelector()(app.getSchemas(), {});
  const serializers = new Map<string, ReturnType<typeof compileSerializer>>();
  app.setSerializerCompiler((route) => {
    const serializer = compiledLater.add(() => {
      const key = JSON.stringify(route.schema);
      let serialize = serializers.get(key);
      if (!serialize) {
        serialize = compileSerializer(route as Parameters<typeof compileSerializer>[0]);
        serializers.set(key, serialize);
      }
      return serialize;
    });
    return (data: unknown) => serializer()(data);
  });
  await app.register(fastifySwagger, {
    // Components are named after their `$id` (Tag, Reference, Problem…) instead of def-0, def-1…
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, index) => String(json.$id ?? `def-${index}`) },
    // The document describes the REST API only: GraphQL, the explorer and the operations endpoints have their
    // own contracts (schema.graphql, the README).
    transform: ({ schema, url }) => ({ schema: url.startsWith("/v1/") ? schema : { ...schema, hide: true }, url }),
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "reftrail REST compatibility API",
        version: "1.0.0",
        description:
          "Tags, shipping references and their lifecycle log. Authenticate with `X-API-Key: <key>` or " +
          "`Authorization: Bearer <key>`. Errors are RFC 9457 problem details (`application/problem+json`). " +
          "Repeatable query parameters (`tag_ids`, `tag_names`, `type`) are given once per value " +
          "(`?tag_ids=a&tag_ids=b`); identifiers and event types may also be comma-separated (`?tag_ids=a,b`), " +
          "tag names may not (a name may contain a comma). POST requests accept an `Idempotency-Key` header. " +
          "GET responses of tags, references and the lifecycle log may come from the server's read cache, which is " +
          "exact (an entry is used only until the organization's data changes); `Cache-Control: no-cache` on a " +
          "request has it computed afresh. " +
          "Every request draws from the API key's cost budget, which GraphQL draws from too: a page of a list costs " +
          "its page size (`limit`, default 50), a bulk ingestion its number of items, any other request 1. Every " +
          'answer carries `RateLimit-Policy: "default";q=<maximum>;w=<seconds to refill from empty>` and ' +
          '`RateLimit: "default";r=<available now>;t=<seconds until full>` (draft-ietf-httpapi-ratelimit-headers, ' +
          "in cost units); a request the budget cannot pay for is 429 THROTTLED with `Retry-After`. " +
          "The GraphQL API at /graphql is the primary surface.",
      },
      components: {
        securitySchemes: {
          apiKey: { type: "apiKey", in: "header", name: "X-API-Key" },
          bearer: { type: "http", scheme: "bearer" },
        },
      },
      security: [{ apiKey: [] }, { bearer: [] }],
      // What reftrail sends to webhook endpoints, one entry per event type (the event catalog).
      webhooks: openApiWebhooks(),
    },
  });

  // Authentication runs before rate limiting and body parsing: an unauthenticated caller costs one lookup.
  app.addHook("onRequest", async (request) => {
    const path = request.url.split("?")[0]!;
    if (!path.startsWith("/v1/") || isPublicPath(request.url)) return;
    const authentication = await authenticateHeaders(services, request.headers);
    if (!authentication.caller) throw new DomainError("UNAUTHENTICATED", authentication.message);
    request.caller = authentication.caller;
    // The key's scopes, checked against the route's row of the one table (src/pipeline/access/scopes.ts) before
    // the body is read and before any handler or hook writes anything. It costs no statement: the scopes came
    // with the key.
    const required = scopeOfRoute(request.method, request.routeOptions.url ?? "");
    if (required && !authentication.caller.scopes.has(required)) throw forbiddenScope(required);
  });

  if (config.rateLimitPerMinute !== null) {
    await app.register(rateLimit, {
      max: config.rateLimitPerMinute,
      timeWindow: "1 minute",
      allowList: (request) => isPublicPath(request.url),
      // Per key (docs/rest.md, "Limits and input errors"); the key is hashed so that it never sits in memory as given.
      keyGenerator: (request) => {
        const key = presentedApiKey(request.headers);
        return key ? createHash("sha256").update(key).digest("hex") : request.ip;
      },
      errorResponseBuilder: (_request, context) => {
        const error = new Error(
          `Rate limit of ${context.max} requests per minute exceeded; retry after ${context.after}`,
        ) as Error & {
          statusCode: number;
        };
        error.statusCode = 429;
        return error;
      },
    });
  }

  registerInputGuards(app);
  // Before the read cache: a response the cache holds is charged like one computed afresh.
  if (budgets) registerRestCostBudget(app, budgets);
  registerIdempotency(app, idempotency, clock);
  registerReadCache(app, readCache);

  // One place sets `Location` on creations, for fresh and for replayed (Idempotency-Key) responses alike:
  // the route declares how to find the path in its body.
  app.addHook("onSend", async (request, reply, payload) => {
    const locationOf = request.routeOptions.config.locationOf as ((body: unknown) => string) | undefined;
    if (reply.statusCode === 201 && locationOf && typeof payload === "string") {
      reply.header("location", locationOf(JSON.parse(payload)));
    }
    return payload;
  });

  // Every route under /v1 has a row in the scope table, or the server does not start (a route cannot ship
  // unguarded by forgetting its row).
  app.addHook("onRoute", (route) => {
    if (!route.url.startsWith("/v1/") || isPublicPath(route.url)) return;
    for (const method of [route.method].flat()) {
      if (method === "HEAD" || method === "OPTIONS") continue;
      if (scopeOfRoute(method, route.url) === undefined)
        throw new Error(`${method} ${route.url} has no row in REST_ROUTE_SCOPES (src/pipeline/access/scopes.ts)`);
    }
  });

  app.get("/v1/openapi.json", { schema: { hide: true } }, async () => app.swagger());
  await app.register(
    async (v1) => {
      for (const registerRoutes of routeGroups) registerRoutes(v1, services);
    },
    { prefix: "/v1" },
  );
}

/** Who makes a change through this request, for the audit log: its key, and the request's id. */
export function changeOf(request: { caller?: Caller; id: string }): ChangeContext {
  return changeBy(callerOf(request), request.id);
}

/** The authenticated caller of a /v1 route (the onRequest hook guarantees one). */
export function callerOf(request: { caller?: Caller }): Caller {
  if (!request.caller)
    throw new DomainError("UNAUTHENTICATED", "Send an API key in X-API-Key or Authorization: Bearer");
  return request.caller;
}

/**
 * A validator whose code is compiled later (compiled-later.ts). Fastify reads a failed validation's `errors` from
 * the function it was given, so they are copied from the compiled validator after every call.
 */
function validatorCompiledLater(compiled: () => ValidateFunction): (data: unknown) => boolean {
  const validate = (data: unknown): boolean => {
    const compiledValidate = compiled();
    const valid = compiledValidate(data);
    validate.errors = compiledValidate.errors;
    return valid;
  };
  validate.errors = null as ValidateFunction["errors"];
  return validate;
}
