import type { ApolloServerPlugin, GraphQLRequestContext } from "@apollo/server";
import type { DocumentNode, FormattedExecutionResult, GraphQLSchema, OperationDefinitionNode } from "graphql";
import { BREAK, TypeInfo, visit, visitWithTypeInfo } from "./graphql-js.ts";
import { refusesCachedResponse, type ReadCache } from "../read-cache.ts";
import type { GraphqlContext } from "./context.ts";

/*
 * GraphQL queries answered from the read cache (src/read-cache.ts, docs/decisions.md "Read cache"). Only what the
 * organization's data version covers can be cached: tags, references, their updates and their lifecycle log.
 * Whether an operation stays inside that is decided once per parsed document, from the schema: every field it
 * selects must belong to one of the types below (Query only through the fields listed). Webhook endpoints,
 * deliveries and attempts change without raising the version (a delivery's status moves with every attempt),
 * and `node`/`nodes` can reach them, so an operation that selects any of them is always executed.
 *
 * Apollo's own response-cache plugin is not used: it keys entries by cache hints and a time to live, so a hit
 * may be stale; here the key is the database's data version, and a hit is exact.
 */

const CACHEABLE_QUERY_FIELDS = new Set(["tag", "tags", "reference", "references", "__typename", "__schema", "__type"]);

const CACHEABLE_TYPES = new Set([
  "Node",
  "PageInfo",
  "Tag",
  "TagConnection",
  "TagEdge",
  "TagSnapshot",
  "Reference",
  "ReferenceConnection",
  "ReferenceEdge",
  "ReferenceUpdate",
  "ReferenceUpdateConnection",
  "ReferenceUpdateEdge",
  "LifecycleEvent",
  "LifecycleEventConnection",
  "LifecycleEventEdge",
]);

/** Whether every field `operation` selects, through any fragment, is covered by the data version. */
export function isCacheableOperation(
  schema: GraphQLSchema,
  document: DocumentNode,
  operation: OperationDefinitionNode,
): boolean {
  if (operation.operation !== "query") return false;
  const typeInfo = new TypeInfo(schema);
  let cacheable = true;
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      // The document's other operations are not run; its fragments are visited whether this one spreads them
      // or not, which can only refuse more.
      OperationDefinition: (node) => (node === operation ? undefined : false),
      Field(node) {
        const parent = typeInfo.getParentType()?.name;
        const covered =
          parent === "Query"
            ? CACHEABLE_QUERY_FIELDS.has(node.name.value)
            : parent !== undefined && (CACHEABLE_TYPES.has(parent) || parent.startsWith("__"));
        if (covered) return undefined;
        cacheable = false;
        return BREAK;
      },
    }),
  );
  return cacheable;
}

/** The plugin: a hit skips execution; a miss without errors is stored for the next request like it. */
export function readCachePlugin(cache: ReadCache): ApolloServerPlugin<GraphqlContext> {
  // Per document (Apollo keeps parsed documents in its own cache, so a repeated query is the same object).
  const decided = new WeakMap<DocumentNode, Map<OperationDefinitionNode, boolean>>();
  const cacheable = (schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode) => {
    let operations = decided.get(document);
    if (!operations) decided.set(document, (operations = new Map()));
    let answer = operations.get(operation);
    if (answer === undefined) operations.set(operation, (answer = isCacheableOperation(schema, document, operation)));
    return answer;
  };
  const keyOf = ({ request, queryHash, contextValue }: GraphQLRequestContext<GraphqlContext>) =>
    cache.keyOf(
      contextValue.caller,
      `graphql ${queryHash} ${request.operationName ?? ""} ${JSON.stringify(request.variables ?? {})}`,
    );

  return {
    async requestDidStart() {
      let key: string | null = null;
      return {
        async responseForOperation(requestContext) {
          const { document, operation, schema, request } = requestContext;
          if (!operation || !cacheable(schema, document, operation)) return null;
          if (refusesCachedResponse(request.http?.headers.get("cache-control"))) return null;
          key = keyOf(requestContext);
          const hit = cache.get<FormattedExecutionResult>(key);
          if (!hit) return null;
          key = null;
          return { http: requestContext.response.http, body: { kind: "single", singleResult: hit } };
        },
        async willSendResponse({ response }) {
          if (key === null || response.body.kind !== "single") return;
          const result = response.body.singleResult;
          if (result.errors !== undefined || response.http.status !== undefined) return;
          cache.set(key, result, JSON.stringify(result).length);
        },
      };
    },
  };
}
