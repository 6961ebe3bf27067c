import { ApolloServer } from "@apollo/server";
import {
  ApolloServerPluginCacheControlDisabled,
  ApolloServerPluginLandingPageDisabled,
} from "@apollo/server/plugin/disabled";
import { Readable } from "node:stream";
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import type { GraphQLSchema } from "graphql";
import type { Tracer } from "@opentelemetry/api";
import type { Registry } from "prom-client";
import type { Config } from "../config.ts";
import type { Services } from "../domain/services.ts";
import { graphqlParseOptions, graphqlValidationRules } from "../pipeline/documents/limits.ts";
import { createGraphqlErrorMasking } from "../pipeline/errors/error-masking.ts";
import { INTERNAL_SERVER_ERROR } from "../pipeline/errors/graphql-errors.ts";
import { withPublishedCost } from "../pipeline/budget/published-cost.ts";
import type { GraphqlPipeline } from "../pipeline/graphql-pipeline.ts";
import { newOperationRequest, type OperationRequest } from "../pipeline/operation-request.ts";
import { GraphqlOperationSpans } from "../tracing/graphql-spans.ts";
import { requestTraceContext } from "../tracing/http-spans.ts";
import { CompiledExecutor } from "./compiled-execution.ts";
import { createGraphqlContext, type GraphqlContext } from "./context.ts";
import { DirectQueries } from "./direct-queries.ts";
import { registerExplorer } from "./explorer-assets.ts";
import { renderExplorerPage, wantsExplorerPage } from "./explorer.ts";
import { apolloRequestOf, operationSourceOf, readCacheKeyOf } from "./http-operation.ts";
import { pipelinePlugin } from "./pipeline-plugin.ts";

/** Where GraphQL is served: POST and GET (queries only); a browser's GET gets the explorer. */
export const GRAPHQL_ENDPOINT = "/graphql";

export interface GraphqlDependencies {
  /** The executable schema (schema.ts), built once and shared with graphql-ws and SSE. */
  readonly schema: GraphQLSchema;
  readonly services: Services;
  readonly config: Config;
  /** The request pipeline every GraphQL operation goes through (src/pipeline/graphql-pipeline.ts). */
  readonly pipeline: GraphqlPipeline;
  /** Recognizes an error that means the database is unreachable right now (SERVICE_UNAVAILABLE, HTTP 503). */
  readonly isServiceUnavailable: (error: unknown) => boolean;
  /** Resolves once a read may run (the read admission), or never when its client left (src/pipeline/admission/). */
  readonly waitForReadTurn: (reply: FastifyReply, organizationId: string | undefined) => Promise<void>;
  /** When tracing is on: a span per operation (src/tracing/graphql-spans.ts). */
  readonly tracer?: Tracer;
  /** Where the route's metrics are registered (which engine answered each operation). */
  readonly registry?: Registry;
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
 * GraphQL over HTTP at {@link GRAPHQL_ENDPOINT}: a thin adapter that turns each request into the pipeline's request
 * value, runs the stages before Apollo (authenticate, resolve the document, look up the read cache), then Apollo
 * Server, which parses, validates and executes, and reaches the later stages through one plugin
 * (pipeline-plugin.ts). The self-hosted explorer answers a browser's GET. Apollo stops with the Fastify instance.
 */
export async function registerGraphql(
  app: FastifyInstance,
  { schema, services, config, pipeline, isServiceUnavailable, waitForReadTurn, tracer, registry }: GraphqlDependencies,
): Promise<void> {
  const masking = createGraphqlErrorMasking(isServiceUnavailable);
  const operationSpans = tracer
    ? new GraphqlOperationSpans<GraphqlContext>(
        tracer,
        (context) => context.request?.cost.requested ?? undefined,
        (context) => context.request?.traceParent,
      )
    : null;
  const executor = new CompiledExecutor(schema);
  const gateway = executor.gateway();
  const apollo = new ApolloServer<GraphqlContext>({
    // The schema, served through a gateway whose executor runs queries compiled once per document.
    gateway: operationSpans ? operationSpans.gateway(gateway) : gateway,
    validationRules: graphqlValidationRules(config),
    parseOptions: graphqlParseOptions(config),
    formatError: masking.format,
    includeStacktraceInErrorResponses: false,
    // Automatic persisted queries are the pipeline's, kept per organization (stage 2); Apollo's store is one for
    // every organization.
    persistedQueries: false,
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
      // Its work is per resolved field, to reach the `no-store` the pipeline's plugin sends on every answer.
      ApolloServerPluginCacheControlDisabled(),
      pipelinePlugin(pipeline, masking, isServiceUnavailable, app.log),
      // After the pipeline's plugin: the span reads the estimate the prepare stage made.
      ...(operationSpans ? [operationSpans.plugin()] : []),
      // fastifyApolloDrainPlugin is deliberately absent: its drainServer calls fastify.close(), and Apollo
      // is stopped from Fastify's own onClose hook, where a nested close() would wait for itself. Fastify's
      // close already stops accepting requests and lets in-flight ones finish.
    ],
  });
  await apollo.start();
  const contextOf = (request: OperationRequest, httpRequest: FastifyRequest) =>
    createGraphqlContext(
      services,
      request as OperationRequest & { caller: NonNullable<OperationRequest["caller"]> },
      httpRequest.log,
      httpRequest.id,
    );
  const direct = new DirectQueries(pipeline, executor, contextOf, operationSpans, registry);
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

    scope.route<{ Reply: string | Buffer | Readable }>({
      method: ["GET", "POST"],
      url: GRAPHQL_ENDPOINT,
      handler: async (httpRequest, reply) => {
        // The explorer page needs no key: it holds nothing, and the user types the key into it.
        if (wantsExplorerPage(httpRequest)) return reply.type("text/html; charset=utf-8").send(explorerPage);
        const request = newOperationRequest({
          transport: "http",
          log: httpRequest.log,
          credentials: httpRequest.headers,
          source: operationSourceOf(httpRequest),
          waitForTurn: (organizationId) => waitForReadTurn(reply, organizationId),
          traceParent: operationSpans ? requestTraceContext(httpRequest) : undefined,
        });
        // 1-3. A request that fails here is still handed to Apollo, whose context throws its failure: it is
        // answered as every GraphQL error is (media type, masking, status from `extensions.http`).
        let resolved = false;
        if (await pipeline.authenticate(request)) {
          resolved = await pipeline.resolveDocument(request, { liveOnly: false });
          const hit = await pipeline.lookUp(
            request,
            () => readCacheKeyOf(httpRequest, request.source),
            httpRequest.headers["cache-control"],
          );
          if (hit) return reply.code(hit.status).headers(hit.headers).type(hit.contentType).send(hit.body);
          // 4-8. A query of a document seen before, without Apollo (direct-queries.ts).
          const answer = await direct.answer(httpRequest, request);
          if (answer) {
            pipeline.keep(request, 200, answer.body, answer.contentType);
            return reply.header("cache-control", "no-store").type(answer.contentType).send(answer.bytes);
          }
        }
        // 4-8. Apollo, with the pipeline's plugin.
        const response = await apollo.executeHTTPGraphQLRequest({
          httpGraphQLRequest: apolloRequestOf(httpRequest, request.source, resolved),
          context: async () => {
            if (request.failure) throw request.failure;
            return contextOf(request, httpRequest);
          },
        });
        for (const [name, value] of response.headers) void reply.header(name, value);
        void reply.code(response.status ?? 200);
        if (response.body.kind !== "complete") {
          // Incremental delivery is not enabled; should Apollo stream, the stream is sent as it comes.
          return reply.send(Readable.from(response.body.asyncIterator));
        }
        direct.learn(httpRequest.headers.accept, reply.statusCode, response.headers.get("content-type"));
        let answer = response.body.string;
        // A document refused before Apollo is answered from its context, where no plugin runs: its cost is added
        // here, as the publish stage adds it to every other refusal.
        if (request.documentRefused) {
          const cost = await pipeline.costOfRefusal(request);
          if (cost) answer = withPublishedCost(answer, cost);
        }
        pipeline.keep(request, reply.statusCode, answer, reply.getHeader("content-type"));
        return answer;
      },
    });
  });
}
