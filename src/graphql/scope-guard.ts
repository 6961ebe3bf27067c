import {
  defaultFieldResolver,
  isAbstractType,
  type GraphQLFieldResolver,
  type GraphQLResolveInfo,
  type GraphQLSchema,
} from "graphql";
import type { ApiKeyScope } from "../domain/organizations/api-key-scopes.ts";
import { forbiddenScope } from "../domain/shared/errors.ts";
import { GRAPHQL_FIELD_SCOPES, NODE_TYPE_SCOPES, allows } from "../pipeline/access/scopes.ts";
import { toGraphqlError } from "../pipeline/errors/graphql-errors.ts";
import type { GraphqlContext } from "./context.ts";

type AnyResolver = GraphQLFieldResolver<unknown, GraphqlContext, Record<string, unknown>>;

/** The FORBIDDEN error of a field the caller's key may not reach, with `extensions.requiredScope`. */
function forbidden(scope: ApiKeyScope): unknown {
  return toGraphqlError(forbiddenScope(scope));
}

/**
 * Applies the scope table (src/pipeline/access/scopes.ts) to the executable schema, once, at startup: every root
 * field of Query, Mutation and Subscription checks the caller's scopes before it resolves (or, for a
 * subscription, before it subscribes), and a field the key may not reach is an error on that field alone (code
 * FORBIDDEN, `requiredScope`), the rest of the answer standing. GraphQL over HTTP, graphql-ws and SSE execute this
 * schema, so the check is the same on every transport. `node`/`nodes` are checked by the type each object
 * resolves to. A root field with no row in the table stops the server from starting.
 */
export function guardSchemaWithScopes(schema: GraphQLSchema): GraphQLSchema {
  const nodeInterface = schema.getType("Node");
  const nodeScope = (value: unknown, context: GraphqlContext, info: GraphQLResolveInfo): ApiKeyScope | null => {
    if (value === null || value === undefined || !nodeInterface || !isAbstractType(nodeInterface)) return null;
    const typeName = nodeInterface.resolveType?.(value, context, info, nodeInterface);
    if (typeof typeName !== "string") return null;
    const scope = NODE_TYPE_SCOPES[typeName];
    if (!scope) throw new Error(`Node type ${typeName} has no row in NODE_TYPE_SCOPES`);
    return scope;
  };

  for (const rootType of [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()]) {
    if (!rootType) continue;
    for (const field of Object.values(rootType.getFields())) {
      const coordinate = `${rootType.name}.${field.name}`;
      const required = GRAPHQL_FIELD_SCOPES[coordinate];
      if (required === undefined)
        throw new Error(`${coordinate} has no row in GRAPHQL_FIELD_SCOPES (src/pipeline/access/scopes.ts)`);
      const resolve = (field.resolve ?? defaultFieldResolver) as AnyResolver;

      if (coordinate === "Query.node") {
        field.resolve = async (parent, args, context: GraphqlContext, info) => {
          const value: unknown = await resolve(parent, args, context, info);
          const scope = nodeScope(value, context, info);
          if (scope && !allows(context.caller.scopes, scope)) throw forbidden(scope);
          return value;
        };
        continue;
      }
      if (coordinate === "Query.nodes") {
        // A node the key may not read is an error in its own place of the list; the others stand.
        field.resolve = async (parent, args, context: GraphqlContext, info) => {
          const values = (await resolve(parent, args, context, info)) as unknown[];
          return values.map((value) => {
            const scope = nodeScope(value, context, info);
            return scope && !allows(context.caller.scopes, scope) ? forbidden(scope) : value;
          });
        };
        continue;
      }
      if (required === null) continue;

      field.resolve = (parent, args, context: GraphqlContext, info) => {
        if (!allows(context.caller.scopes, required)) throw forbidden(required);
        return resolve(parent, args, context, info);
      };
      const subscribe = field.subscribe as AnyResolver | undefined;
      if (subscribe) {
        // A subscription is refused when it starts (SPEC §3.1), before it registers anything.
        field.subscribe = (parent, args, context: GraphqlContext, info) => {
          if (!allows(context.caller.scopes, required)) throw forbidden(required);
          return subscribe(parent, args, context, info);
        };
      }
    }
  }
  return schema;
}
