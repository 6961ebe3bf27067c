import { ApolloServer, type ApolloServerPlugin } from "@apollo/server";
import { unwrapResolverError } from "@apollo/server/errors";
import { ApolloServerPluginLandingPageDisabled } from "@apollo/server/plugin/disabled";
import { fastifyApolloHandler } from "@as-integrations/fastify";
import type { FastifyBaseLogger, FastifyError, FastifyInstance } from "fastify";
import type { Config } from "../config.ts";
import type { Services } from "../domain/services.ts";
import { createGraphqlContext, type GraphqlContext } from "./context.ts";
import { formatGraphqlError, INTERNAL_SERVER_ERROR, isUnexpectedError } from "./errors.ts";
import { registerExplorer, renderExplorerPage, wantsExplorerPage } from "./explorer.ts";
import { graphqlParseOptions, graphqlValidationRules, operationCostPlugin } from "./limits.ts";
import { buildGraphqlSchema } from "./schema.ts";

/** Where GraphQL is served: POST and GET (queries only); a browser's GET gets the explorer. */
export const GRAPHQL_ENDPOINT = "/graphql";

export interface GraphqlDependencies {
  readonly services: Services;
  readonly config: Config;
}

/** Logs the errors {@link formatGraphqlError} masks, with the request's logger (and so its request id). */
function unexpectedErrorLoggingPlugin(serverLog: FastifyBaseLogger): ApolloServerPlugin<GraphqlContext> {
  return {
    async contextCreationDidFail({ error }) {
      if (isUnexpectedError(error)) serverLog.error({ err: error }, "GraphQL context creation failed");
    },
    async requestDidStart() {
      return {
        async didEncounterErrors({ errors, contextValue, operationName }) {
          for (const error of errors) {
            if (!isUnexpectedError(error)) continue;
            // contextValue is typed as present, but is a bare object when the context itself failed.
            const log = (contextValue as Partial<GraphqlContext>).log ?? serverLog;
            log.error(
              { err: unwrapResolverError(error), path: error.path, operationName },
              "GraphQL operation failed unexpectedly",
            );
          }
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
 * GraphQL over HTTP at {@link GRAPHQL_ENDPOINT} (SPEC §1, §15): Apollo Server on this Fastify instance, the
 * schema from schema.graphql, per-request authentication and loaders, depth and cost limits, masked
 * unexpected errors, and the self-hosted explorer. Apollo stops with the Fastify instance.
 */
export async function registerGraphql(app: FastifyInstance, { services, config }: GraphqlDependencies): Promise<void> {
  const apollo = new ApolloServer<GraphqlContext>({
    schema: buildGraphqlSchema(),
    validationRules: graphqlValidationRules(config),
    parseOptions: graphqlParseOptions(config),
    formatError: formatGraphqlError,
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
      operationCostPlugin<GraphqlContext>(config),
      unexpectedErrorLoggingPlugin(app.log),
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

    const executeGraphql = fastifyApolloHandler<GraphqlContext>(apollo, {
      context: async (request) => createGraphqlContext({ services, credentials: request.headers, log: request.log }),
    });
    // Typed as the Apollo handler's route (its replies are strings).
    scope.route<{ Reply: string }>({
      method: ["GET", "POST"],
      url: GRAPHQL_ENDPOINT,
      handler: async function (request, reply) {
        // The explorer page needs no key: it holds nothing, and the user types the key into it.
        if (wantsExplorerPage(request)) return reply.type("text/html; charset=utf-8").send(explorerPage);
        return executeGraphql.call(this, request, reply);
      },
    });
  });
}
