import { changeOf } from "../context.ts";
import type { Resolvers } from "../__generated__/resolvers-types.ts";
import { withoutNulls } from "../arguments.ts";
import { underArgument, type InputLocator } from "../../pipeline/errors/graphql-errors.ts";
import { forwardPage, toConnection } from "../pagination.ts";

/** Tags: reads, `Tag.references`, and the tag mutations. */
export const tagResolvers: Resolvers = {
  Query: {
    tag: (_, { id }, { caller, services }) => services.tags.getTag(caller.organizationId, id),
    tags: async (_, { first, after, filter }, { caller, services }) =>
      toConnection(
        await services.tags.listTags(caller.organizationId, {
          ...withoutNulls(filter),
          ...forwardPage({ first, after }),
        }),
      ),
  },
  Tag: {
    // Through a loader: the first pages of all the tags of a list come from two queries (see loaders.ts).
    references: async (tag, args, { loaders }) =>
      toConnection(await loaders.referencesByTag.load({ tagId: tag.id, ...forwardPage(args) })),
  },
  Mutation: {
    createTag: async (_, { input }, { caller, services }) => ({
      tag: await services.tags.createTag(caller.organizationId, input.name),
    }),
    renameTag: async (_, { input }, { caller, services }) => ({
      tag: await services.tags.renameTag(caller.organizationId, input.id, input.name),
    }),
    deleteTag: async (_, { input }, { caller, services, requestId }) => {
      await services.tags.deleteTag(caller.organizationId, input.id, changeOf({ caller, requestId }));
      // Ids are lower-case UUIDs everywhere; the service accepted this one in any case.
      return { deletedTagId: input.id.toLowerCase() };
    },
  },
};

/** Where each tag field's service input sits in its arguments (for `extensions.field`). */
export const tagInputLocators: Readonly<Record<string, InputLocator>> = {
  "Query.tags": underArgument(["filter"], { cursor: ["after"] }),
};
