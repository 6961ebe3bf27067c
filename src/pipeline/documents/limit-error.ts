import type { ASTNode } from "graphql";
import { GraphQLError } from "graphql";

/** The limits on the shape of an operation (limits.ts, selection-limit.ts), as `extensions.limit.kind` names them. */
export type LimitKind = "selections" | "depth" | "aliases" | "cost" | "introspection-depth";

/** A limit's refusal: GRAPHQL_VALIDATION_FAILED, HTTP 400, `extensions.limit = { kind, maximum, actual }`. */
export function limitError(
  kind: LimitKind,
  message: string,
  maximum: number,
  actual: number | null,
  nodes?: ASTNode,
): GraphQLError {
  return new GraphQLError(message, {
    ...(nodes && { nodes }),
    extensions: { code: "GRAPHQL_VALIDATION_FAILED", http: { status: 400 }, limit: { kind, maximum, actual } },
  });
}
