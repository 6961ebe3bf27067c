/*
 * The yardsticks: a "hello world" Apollo Server on Fastify (the same integration reftrail uses, with Apollo's
 * defaults) and a plain Fastify JSON route, on their own port. Ratios against them show what reftrail's own
 * work (authentication, validation, database, serialization) costs on this machine.
 */
import { ApolloServer } from "@apollo/server";
import { fastifyApolloHandler } from "@as-integrations/fastify";
import Fastify, { type FastifyInstance } from "fastify";

export interface Baseline {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  close(): Promise<void>;
}

export const HELLO_QUERY = JSON.stringify({ query: "{ hello }" });

export async function startBaseline(): Promise<Baseline> {
  const http: FastifyInstance = Fastify({ logger: false });
  const apollo = new ApolloServer({
    typeDefs: "type Query { hello: String }",
    resolvers: { Query: { hello: () => "world" } },
    stopOnTerminationSignals: false,
  });
  await apollo.start();
  http.route({ method: ["GET", "POST"], url: "/graphql", handler: fastifyApolloHandler(apollo) });
  http.get("/hello", async () => ({ hello: "world" }));
  await http.listen({ host: "127.0.0.1", port: 0 });
  const address = http.server.address();
  if (!address || typeof address === "string") throw new Error("baseline server did not bind a TCP port");
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: async () => {
      await http.close();
      await apollo.stop();
    },
  };
}
