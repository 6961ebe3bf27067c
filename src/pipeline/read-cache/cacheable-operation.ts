import type { ApolloServerPlugin } from "@apollo/server";
import type { DocumentNode, GraphQLSchema, OperationDefinitionNode } from "graphql";
import { BREAK, TypeInfo, visit, visitWithTypeInfo } from "graphql";
import type { GraphqlContext } from "../../graphql/context.ts";
import { CACHEABLE_QUERY_FIELDS, CACHEABLE_TYPES } from "./cacheable-types.ts";

/*
 * GraphQL queries answered from the read cache (read-cache.ts, docs/decisions.md "Read cache"). Whether an
 * operation stays inside what the data version covers (cacheable-types.ts) is decided once per parsed document,
 * from the schema.
 *
 * Apollo's own response-cache plugin is not used: it keys entries by cache hints and a time to live, so a hit
 * may be stale; here the key is the database's data version, and a hit is exact. It also runs a hit through
 * Apollo's request pipeline and serializes it again every time; here a hit is the stored bytes.
 */

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

/**
 * The plugin's half of the GraphQL read cache. The HTTP route looks a request up before Apollo sees it, by its
 * caller's read version and its query text, operation name, variables and Accept header, and sends a hit's bytes
 * as they were sent the first time: a hit costs the key lookup and no GraphQL work at all. Only this plugin can
 * tell whether a response may be kept: it marks the request's slot when the operation executed was a query
 * within what the data version covers (decided once per parsed document) and answered without errors; the route
 * then keeps the bytes Apollo sends.
 */
export function readCachePlugin(): ApolloServerPlugin<GraphqlContext> {
  // Per document (Apollo keeps parsed documents in its own cache, so a repeated query is the same object).
  const decided = new WeakMap<DocumentNode, Map<OperationDefinitionNode, boolean>>();
  const cacheable = (schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode) => {
    let operations = decided.get(document);
    if (!operations) decided.set(document, (operations = new Map()));
    let answer = operations.get(operation);
    if (answer === undefined) operations.set(operation, (answer = isCacheableOperation(schema, document, operation)));
    return answer;
  };
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ contextValue, operation }) {
          const slot = contextValue.readCacheSlot;
          if (slot) slot.read = operation?.operation === "query";
        },
        async willSendResponse({ contextValue, document, operation, schema, response }) {
          // contextValue is typed as present, but is a bare object when the context itself failed.
          const slot = (contextValue as Partial<GraphqlContext>).readCacheSlot;
          if (!slot || !document || !operation || response.body.kind !== "single") return;
          if (response.body.singleResult.errors !== undefined || response.http.status !== undefined) return;
          slot.cacheable = cacheable(schema, document, operation);
        },
      };
    },
  };
}
