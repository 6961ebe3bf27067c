import type { DomainNode, NodeKind } from "../../domain/nodes/node-service.ts";
import type { Resolvers } from "../__generated__/resolvers-types.ts";
import type { GraphqlContext } from "../context.ts";
import { badUserInput } from "../../pipeline/errors/graphql-errors.ts";

/* Relay global object identification: `Query.node`, `Query.nodes` and the `Node` interface. */

/** More ids than this in one `nodes` field is BAD_USER_INPUT (the list is read in one batch). */
export const MAX_NODE_IDS = 100;

/*
 * The GraphQL type of each object handed out by `node`/`nodes`. The domain record itself is the parent of its
 * type's field resolvers (as everywhere else), so its kind travels beside it rather than inside it; the map is
 * weak, so it holds nothing past the request.
 */
const kindOf = new WeakMap<object, NodeKind>();

function reveal(node: DomainNode | null): DomainNode["value"] | null {
  if (!node) return null;
  kindOf.set(node.value, node.kind);
  return node.value;
}

const load = (context: GraphqlContext, id: string) => context.loaders.nodeById.load(id.toLowerCase());

export const nodeResolvers: Resolvers = {
  Query: {
    node: async (_, { id }, context) => reveal(await load(context, id)),
    nodes: async (_, { ids }, context) => {
      if (ids.length > MAX_NODE_IDS) throw badUserInput(`ids may hold at most ${MAX_NODE_IDS} ids`, ["ids"]);
      return (await Promise.all(ids.map((id) => load(context, id)))).map(reveal);
    },
  },
  Node: {
    __resolveType: (value) => {
      const kind = kindOf.get(value);
      // Only node/nodes return the interface, and they always record the kind.
      if (!kind) throw new Error("Node value without a recorded type");
      return kind;
    },
  },
};
