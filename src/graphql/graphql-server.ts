import { ApolloServer, HeaderMap, type ApolloServerPlugin } from "@apollo/server";
import { unwrapResolverError } from "@apollo/server/errors";
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginLandingPageDisabled,
} from "@apollo/server/plugin/disabled";
import type { FastifyBaseLogger, FastifyError, FastifyInstance } from "fastify";
import type { GraphQLSchema } from "graphql";
import type { Config } from "../config.ts";
import type { Services } from "../domain/services.ts";
import { CompiledExecutor } from "./compiled-execution.ts";
import { createGraphqlContext, type GraphqlContext } from "./context.ts";
import { findVariablesIssue, MAX_JSON_DEPTH } from "../domain/shared/json-input.ts";
import { findLiteralIssue, literalIssueError } from "../pipeline/documents/literal-guard.ts";
import {
  createGraphqlErrorMasking,
  SERVICE_UNAVAILABLE,
  SERVICE_UNAVAILABLE_MESSAGE,
  type GraphqlErrorMasking,
} from "../pipeline/errors/error-masking.ts";
import { INTERNAL_SERVER_ERROR, isUnexpectedError, variableIssueError } from "../pipeline/errors/graphql-errors.ts";
import { registerExplorer } from "./explorer-assets.ts";
import { renderExplorerPage, wantsExplorerPage } from "./explorer.ts";
import { estimatedOperationCost, graphqlParseOptions, graphqlValidationRules, operationCostPlugin } from "../pipeline/documents/limits.ts";
import { GraphQLError } from "graphql";
import { authenticateHeaders } from "../authentication.ts";
import { readCachePlugin } from "../pipeline/read-cache/cacheable-operation.ts";
import { GraphqlReadCache } from "../read-cache/graphql-http.ts";
import type { ReadCache } from "../pipeline/read-cache/read-cache.ts";
import type { ReadAdmissionGate } from "../pipeline/admission/read-admission-gate.ts";
import { readAdmissionPlugin } from "../admission/graphql-plugin.ts";
import type { Tracer } from "@opentelemetry/api";
import { GraphqlOperationSpans } from "../tracing/graphql-spans.ts";
import { requestTraceContext } from "../tracing/http-spans.ts";
import { DOCUMENT_REFUSALS, DocumentResolver } from "../pipeline/trusted-documents/document-resolution.ts";
import { documentRefusalError, TrustedDocumentsHttp } from "../trusted-documents/graphql-http.ts";
import { apolloFastifyHandler } from "./apollo-fastify-handler.ts";
import { costBudgetPlugin, costOfRefusal } from "../budget/graphql-plugin.ts";
import { withPublishedCost } from "../pipeline/budget/published-cost.ts";
import type { CostBudgetService } from "../domain/budgets/cost-budget-service.ts";
import { sendCachedResponse } from "../pipeline/budget/cached-cost.ts";

/** Where GraphQL is served: POST and GET (queries only); a browser's GET gets the explorer. */
export const GRAPHQL_ENDPOINT = "/graphql";

export interface GraphqlDependencies {
  /** The executable schema (schema.ts), built once and shared with the WebSocket transport (src/live/). */
  readonly schema: GraphQLSchema;
  readonly services: Services;
  readonly config: Config;
  /** Recognizes an error that means the database is unreachable right now (SERVICE_UNAVAILABLE, HTTP 503). */
  readonly isServiceUnavailable: (error: unknown) => boolean;
  readonly readCache: ReadCache;
  /** Holds a query that the cache could not answer until the read admission lets it run (src/admission/). */
  readonly readAdmission: Pick<ReadAdmissionGate, "holdRead">;
  /** When tracing is on: a span per operation (src/tracing/graphql-spans.ts). */
  readonly tracer?: Tracer;
  /**
   * What charges each operation and publishes its `extensions.cost`; null only on the bench's "budget off" server
   * (src/app.ts, `withoutCostBudget`), whose responses carry no cost and so are never kept by the read cache.
   */
  readonly budgets: CostBudgetService | null;
}

/** Seconds a client is asked to wait (`Retry-After`) when the database is unavailable. */
const RETRY_AFTER_SECONDS = 5;

/**
 * A request that failed because the database is unreachable answers HTTP 503 with Retry-After, its errors
 * coded SERVICE_UNAVAILABLE (error-masking.ts), so that clients retry instead of reporting a bug.
 */
function serviceUnavailablePlugin(
  isServiceUnavailable: (error: unknown) => boolean,
): ApolloServerPlugin<GraphqlContext> {
  return {
    async requestDidStart() {
      return {
        async didEncounterErrors({ errors, response }) {
          if (!errors.some((error) => isServiceUnavailable(unwrapResolverError(error)))) return;
          response.http.status = 503;
          response.http.headers.set("retry-after", String(RETRY_AFTER_SECONDS));
        },
      };
    },
  };
}

/** Logs the errors the masking hides, with the request's logger (and so its request id). */
function unexpectedErrorLoggingPlugin(
  serverLog: FastifyBaseLogger,
  masking: GraphqlErrorMasking,
): ApolloServerPlugin<GraphqlContext> {
  return {
    async contextCreationDidFail({ error }) {
      if (isUnexpectedError(error)) serverLog.error({ err: error }, "GraphQL context creation failed");
    },
    async requestDidStart() {
      return {
        async didEncounterErrors({ errors, contextValue, operationName }) {
          // contextValue is typed as present, but is a bare object when the context itself failed.
          masking.logUnexpected((contextValue as Partial<GraphqlContext>).log ?? serverLog, errors, operationName);
        },
      };
    },
  };
}

/**
 * Checks every operation's variables like REST checks bodies (well-formed Unicode without NUL, bounded nesting),
 * and its string literals for the same text rule (src/graphql/literal-guard.ts), before execution: a bad value is
 * refused with a field path instead of reaching a scalar, a service or the database.
 */
function variablesGuardPlugin(): ApolloServerPlugin<GraphqlContext> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ request, document }) {
          const literal = findLiteralIssue(document);
          const issue = literal ?? findVariablesIssue(request.variables);
          if (!issue) return;
          const error = literal
            ? literalIssueError(literal)
            : variableIssueError(issue, issue.code === "TOO_DEEP" ? MAX_JSON_DEPTH : undefined);
          // HTTP 400: nothing was executed (Apollo reads the status from `extensions.http`).
          throw new GraphQLError(error.message, { extensions: { ...error.extensions, http: { status: 400 } } });
        },
      };
    },
  };
}

/**
 * `Cache-Control: no-store` on every response, as Apollo's cache-control plugin sends it when no field carries a
 * cache hint (none does: every answer depends on the caller's key). That plugin is disabled because it does its
 * work per resolved field (about 1 % of a reference-with-50-events request) to reach the same header.
 */
function noStorePlugin(): ApolloServerPlugin<GraphqlContext> {
  return {
    async requestDidStart() {
      return {
        async willSendResponse({ response }) {
          response.http.headers.set("cache-control", "no-store");
        },
      };
    },
  };
}

/** The `extensions.code` of a request that failed before GraphQL saw it (body parsing, limits, rate limit). */
function transportErrorCode(error: FastifyError, status: number): string {
  if (status === 413) return "PAYLOAD_TOO_LARGE";
  if (status === 415) return "UNSUPPORTED_MEDIA_TYPE";
  if (status === 429) return "RATE_LIMITED";
  if (error instanceof SyntaxError || error.code === "FST_ERR_CTP_INVALID_JSON_BODY") return "MALFORMED_JSON";
  return "BAD_REQUEST";
}

/**
 * GraphQL over HTTP at {@link GRAPHQL_ENDPOINT}: Apollo Server on this Fastify instance, the
 * schema from schema.graphql, per-request authentication and loaders, depth and cost limits, masked
 * unexpected errors, and the self-hosted explorer. Apollo stops with the Fastify instance.
 */
export async function registerGraphql(
  app: FastifyInstance,
  { schema, services, config, isServiceUnavailable, readCache, readAdmission, tracer, budgets }: GraphqlDependencies,
): Promise<void> {
  const masking = createGraphqlErrorMasking(isServiceUnavailable);
  const operationSpans = tracer
    ? new GraphqlOperationSpans<GraphqlContext>(tracer, estimatedOperationCost, (context) => context.traceParent)
    : null;
  const gateway = new CompiledExecutor(schema).gateway();
  const apollo = new ApolloServer<GraphqlContext>({
    // The schema, served through a gateway whose executor runs queries compiled once per document.
    gateway: operationSpans ? operationSpans.gateway(gateway) : gateway,
    validationRules: graphqlValidationRules(config),
    parseOptions: graphqlParseOptions(config),
    formatError: masking.format,
    includeStacktraceInErrorResponses: false,
    // Introspection stays on: the explorer and codegen clients need it, and it requires an API key anyway.
    introspection: true,
    // Apollo's CSRF guard exists for cookie-authenticated browsers. Here every operation needs an API key in
    // a header (X-API-Key or Authorization), which a cross-site form or simple request cannot send, so the
    // guard would only reject legitimate clients (such as GET requests without a preflight header).
    csrfPrevention: false,
    // The process owner (main.ts) handles signals and closes Fastify; Apollo stops in Fastify's onClose.
    stopOnTerminationSignals: false,
    plugins: [
      // The default landing page loads from a CDN; the explorer below is served locally instead.
      ApolloServerPluginLandingPageDisabled(),
      ApolloServerPluginCacheControlDisabled(),
      noStorePlugin(),
      operationCostPlugin<GraphqlContext>(config),
      ...(operationSpans ? [operationSpans.plugin()] : []),
      unexpectedErrorLoggingPlugin(app.log, masking),
      variablesGuardPlugin(),
      serviceUnavailablePlugin(isServiceUnavailable),
      readCachePlugin(),
      // Charges the estimate once every check has passed, before the read admission and execution.
      ...(budgets ? [costBudgetPlugin<GraphqlContext>(budgets, isServiceUnavailable)] : []),
      readAdmissionPlugin<GraphqlContext>(),
      // fastifyApolloDrainPlugin is deliberately absent: its drainServer calls fastify.close(), and Apollo
      // is stopped from Fastify's own onClose hook, where a nested close() would wait for itself. Fastify's
      // close already stops accepting requests and lets in-flight ones finish.
    ],
  });
  await apollo.start();
  app.addHook("onClose", async () => {
    await apollo.stop();
  });

  // An encapsulated scope, so that the error handler below answers in GraphQL's shape for these routes only.
  await app.register(async (scope) => {
    scope.setErrorHandler((error: FastifyError, request, reply) => {
      const status = error.statusCode !== undefined && error.statusCode >= 400 ? error.statusCode : 500;
      if (status >= 500) {
        request.log.error({ err: error }, "GraphQL request failed before execution");
        return reply
          .code(500)
          .send({ errors: [{ message: "Internal server error", extensions: { code: INTERNAL_SERVER_ERROR } }] });
      }
      return reply
        .code(status)
        .send({ errors: [{ message: error.message, extensions: { code: transportErrorCode(error, status) } }] });
    });

    await registerExplorer(scope, { endpoint: GRAPHQL_ENDPOINT });
    const explorerPage = renderExplorerPage({ endpoint: GRAPHQL_ENDPOINT });

    const readCacheHttp = new GraphqlReadCache(readCache);
    readCacheHttp.register(scope);

    const trustedDocuments = new TrustedDocumentsHttp(new DocumentResolver(services.trustedDocuments));

    const executeGraphql = apolloFastifyHandler<GraphqlContext>(apollo, {
      context: async (request, reply) => {
        try {
          // Found on the route, before the read cache (trusted-documents/graphql-http.ts); thrown here, so that a
          // refusal is answered like every GraphQL error, and an outage like every outage.
          if (request.graphqlRouteFailure !== undefined) throw request.graphqlRouteFailure;
          const context = await createGraphqlContext({
            services,
            credentials: request.headers,
            log: request.log,
            caller: request.caller,
            readCacheSlot: request.graphqlReadCache,
            holdRead: () => readAdmission.holdRead(reply),
            operationCost: { requested: null, charge: null },
            traceParent: operationSpans ? requestTraceContext(request) : undefined,
          });
          if (request.graphqlDocumentRefusal) throw documentRefusalError(request.graphqlDocumentRefusal);
          // A key the route did not find (it was issued between the two lookups) had no document decided for it.
          if (!request.caller && context.caller.trustedDocumentsOnly)
            throw documentRefusalError(DOCUMENT_REFUSALS.trustedOnly());
          return context;
        } catch (error) {
          // Authentication reads the database: an outage there is a 503 too (Apollo reads `extensions.http`).
          if (!isServiceUnavailable(error)) throw error;
          request.log.error({ err: error }, "database unavailable");
          throw new GraphQLError(SERVICE_UNAVAILABLE_MESSAGE, {
            extensions: {
              code: SERVICE_UNAVAILABLE,
              http: { status: 503, headers: new HeaderMap([["retry-after", String(RETRY_AFTER_SECONDS)]]) },
            },
          });
        }
      },
    });
    // Typed as the Apollo handler's route (its replies are strings).
    scope.route<{ Reply: string }>({
      method: ["GET", "POST"],
      url: GRAPHQL_ENDPOINT,
      handler: async function (request, reply) {
        // The explorer page needs no key: it holds nothing, and the user types the key into it.
        if (wantsExplorerPage(request)) return reply.type("text/html; charset=utf-8").send(explorerPage);
        // Authentication runs here, outside the read cache and once: a hit is looked up under the caller's read
        // version, and the context reuses the caller. A request it cannot authenticate, or an outage, goes on to
        // Apollo's context, which answers the error (401 or 503) as for any request; an outage is handed over as
        // it is, so that the request is not run with a caller whose document was not decided here.
        const caller = await authenticateHeaders(services, request.headers).catch((error: unknown) => {
          request.graphqlRouteFailure = error;
          return null;
        });
        if (caller) {
          request.caller = caller;
          // A request by document id becomes the request with the registered text; a trusted-documents-only key's
          // text that is not registered is refused (src/trusted-documents/).
          await trustedDocuments.apply(request, caller).catch((error: unknown) => {
            request.graphqlRouteFailure = error;
          });
          const decided = request.graphqlRouteFailure === undefined && !request.graphqlDocumentRefusal;
          const hit = decided ? readCacheHttp.find(request, caller) : null;
          // Charged and published like the response it repeats (src/budget/cached-cost.ts).
          if (hit && budgets) {
            return sendCachedResponse(reply, hit, caller, budgets).catch((error: unknown) => {
              if (!isServiceUnavailable(error)) throw error;
              request.log.error({ err: error }, "database unavailable");
              return reply
                .code(503)
                .header("retry-after", String(RETRY_AFTER_SECONDS))
                .type("application/json; charset=utf-8")
                .send(
                  JSON.stringify({
                    errors: [{ message: SERVICE_UNAVAILABLE_MESSAGE, extensions: { code: SERVICE_UNAVAILABLE } }],
                  }),
                );
            });
          }
        }
        // A query the cache could not answer waits for admission inside Apollo, before execution
        // (src/admission/graphql-plugin.ts); a mutation does not.
        const answer = await executeGraphql.call(this, request, reply);
        // A document refused on the route is answered from Apollo's context, where no plugin runs: its cost is
        // added here, as the budget's plugin adds it to every other refusal.
        if (request.graphqlDocumentRefusal && request.caller && budgets && answer !== undefined) {
          const cost = await costOfRefusal(budgets, request.caller);
          if (cost) return withPublishedCost(answer, cost);
        }
        return answer;
      },
    });
  });
}
