import { Readable } from "node:stream";
import { HeaderMap, type ApolloServer, type BaseContext } from "@apollo/server";
import type { FastifyReply, FastifyRequest } from "fastify";

/*
 * Apollo Server on a Fastify route: what `fastifyApolloHandler` of @as-integrations/fastify does, with one
 * difference: a GET request's search string may come from `request.graphqlSearch` (a request that named a
 * registered document by id, rewritten to carry its text: src/trusted-documents/graphql-http.ts) instead of the
 * URL, which Fastify does not let a route change.
 */

export interface ApolloFastifyOptions<Context extends BaseContext> {
  readonly context: (request: FastifyRequest, reply: FastifyReply) => Promise<Context>;
}

function headerMapOf(headers: FastifyRequest["headers"]): HeaderMap {
  const map = new HeaderMap();
  for (const [name, value] of Object.entries(headers)) {
    if (value) map.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  return map;
}

export function apolloFastifyHandler<Context extends BaseContext>(
  apollo: ApolloServer<Context>,
  options: ApolloFastifyOptions<Context>,
): (request: FastifyRequest, reply: FastifyReply) => Promise<string | undefined> {
  apollo.assertStarted("apolloFastifyHandler()");
  return async (request, reply) => {
    const search = request.graphqlSearch ?? new URL(request.url, "http://localhost/").search;
    const response = await apollo.executeHTTPGraphQLRequest({
      httpGraphQLRequest: {
        method: request.method.toUpperCase(),
        headers: headerMapOf(request.headers),
        search,
        body: request.body,
      },
      context: () => options.context(request, reply),
    });
    for (const [name, value] of response.headers) void reply.header(name, value);
    void reply.code(response.status ?? 200);
    if (response.body.kind === "complete") return response.body.string;
    // Sent here (Fastify takes the reply as sent once `send` is called).
    void reply.send(Readable.from(response.body.asyncIterator));
    return undefined;
  };
}
