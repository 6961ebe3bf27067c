import type { DocumentNode, GraphQLSchema, OperationDefinitionNode } from "graphql";
import { BREAK, TypeInfo, visit, visitWithTypeInfo } from "graphql";
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
