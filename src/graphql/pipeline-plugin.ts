import { HeaderMap, type ApolloServerPlugin, type GraphQLResponse } from "@apollo/server";
import { unwrapResolverError } from "@apollo/server/errors";
import { GraphQLError } from "graphql";
import type { FastifyBaseLogger } from "fastify";
import type { GraphqlPipeline } from "../pipeline/graphql-pipeline.ts";
import type { GraphqlErrorMasking } from "../pipeline/errors/error-masking.ts";
import type { GraphqlContext } from "./context.ts";

/*
 * The pipeline's stages 4 to 8 (src/pipeline/graphql-pipeline.ts) for GraphQL over HTTP, where Apollo Server
 * parses, validates and executes: the one Apollo plugin that hands each of Apollo's steps to its stage. What the
 * stages decide travels in the request value (`contextValue.request`), not in the plugin.
 *
 *   didResolveOperation   4. prepare (on Apollo's parsed and validated document)
 *   responseForOperation  6. charge, then 5. admit (a refused request never takes a place among the reads)
 *   (Apollo executes)     7. execute
 *   willSendResponse      8. publish: `extensions.cost`, the read cache's mark; `Cache-Control: no-store`
 *   didEncounterErrors    errors the masking hides are logged; an outage is a 503 with Retry-After
 */

/** Seconds a client is asked to wait (`Retry-After`) when the database is unavailable. */
const RETRY_AFTER_SECONDS = 5;

function earlyResponse(status: number, retryAfterSeconds: number, error: GraphQLError): GraphQLResponse {
  const { http: _head, ...extensions } = error.extensions;
  return {
    http: { status, headers: new HeaderMap([["retry-after", String(retryAfterSeconds)]]) },
    body: {
      kind: "single",
      singleResult: { errors: [{ message: error.message, extensions }] },
    },
  };
}

export function pipelinePlugin(
  pipeline: GraphqlPipeline,
  masking: GraphqlErrorMasking,
  isServiceUnavailable: (error: unknown) => boolean,
  serverLog: FastifyBaseLogger,
): ApolloServerPlugin<GraphqlContext> {
  return {
    async contextCreationDidFail({ error }) {
      // The request's failure (401, 503, a refused document) is thrown on purpose; anything else is a bug.
      if (!(error instanceof GraphQLError)) serverLog.error({ err: error }, "GraphQL context creation failed");
    },
    async requestDidStart() {
      return {
        async didResolveOperation({ request, document, contextValue }) {
          const refusal = pipeline.prepareParsed(contextValue.request, {
            text: request.query ?? "",
            operationName: request.operationName ?? null,
            document,
            variables: request.variables ?? null,
          });
          if (!refusal) return;
          // HTTP 400: nothing was executed (Apollo reads the status from `extensions.http`).
          if (refusal.extensions.http) throw refusal;
          throw new GraphQLError(refusal.message, { extensions: { ...refusal.extensions, http: { status: 400 } } });
        },
        async responseForOperation({ contextValue }) {
          const refused = await pipeline.charge(contextValue.request);
          if (refused) return earlyResponse(refused.status, refused.retryAfterSeconds, refused.error);
          await pipeline.admit(contextValue.request);
          return null;
        },
        async didEncounterErrors({ errors, contextValue, operationName, response }) {
          // contextValue is typed as present, but is a bare object when the context itself failed.
          masking.logUnexpected((contextValue as Partial<GraphqlContext>).log ?? serverLog, errors, operationName);
          if (!errors.some((error) => isServiceUnavailable(unwrapResolverError(error)))) return;
          response.http.status = 503;
          response.http.headers.set("retry-after", String(RETRY_AFTER_SECONDS));
        },
        async willSendResponse({ contextValue, response }) {
          // Every answer depends on the caller's key: never stored by a shared cache.
          response.http.headers.set("cache-control", "no-store");
          const request = (contextValue as Partial<GraphqlContext>).request;
          if (!request || response.body.kind !== "single") return;
          const result = response.body.singleResult;
          const cost = await pipeline.publish(request, result, response.http.status !== undefined);
          if (!cost) return;
          // Last among the extensions: a kept answer is served again with its cost replaced (budget/cached-cost.ts).
          const { cost: _replaced, ...others } = result.extensions ?? {};
          result.extensions = { ...others, cost };
        },
      };
    },
  };
}
