import type { TaggedReference } from "../../domain/models.ts";
import type { Resolvers } from "../__generated__/resolvers-types.ts";
import { withoutNulls } from "../arguments.ts";
import { underArgument, type InputLocator } from "../../pipeline/errors/graphql-errors.ts";
import { forwardPage, toConnection } from "../pagination.ts";
import { leaveFirstEvents, selectedFirstEvents } from "./prefetched-events.ts";

/**
 * References: reads, relations (all through the request's loaders), and the mutations of
 * both the API's users and the tracking side. A mutation returns what the service returned; fields of the
 * payload that the service did not return are read afresh.
 */
export const referenceResolvers: Resolvers = {
  Query: {
    reference: async (_, { id }, { caller, services }, info) => {
      const firstEvents = selectedFirstEvents(info);
      if (firstEvents === undefined) return services.references.getReference(caller.organizationId, id);
      const { reference, events } = await services.lifecycleLog.getReferenceWithFirstEvents(
        caller.organizationId,
        id,
        firstEvents,
      );
      leaveFirstEvents(reference, firstEvents, events);
      return reference;
    },
    references: async (_, { first, after, filter }, { caller, services }) =>
      toConnection(
        await services.references.listReferences(caller.organizationId, {
          ...withoutNulls(filter),
          ...forwardPage({ first, after }),
        }),
      ),
  },
  Reference: {
    parent: (reference, _, { loaders }) =>
      reference.parentReferenceId === null ? null : loaders.referenceById.load(reference.parentReferenceId),
    children: (reference, _, { loaders }) => loaders.childrenByParentId.load(reference.id),
    // A reference read by a service carries its tags (read in the same statement); others go through the loader.
    tags: (reference, _, { loaders }) =>
      "tags" in reference ? [...(reference as TaggedReference).tags] : loaders.tagsByReferenceId.load(reference.id),
    // One service call per reference: a page of updates is read for one reference at a time (like events).
    updates: async (reference, args, { caller, services }) => {
      const { limit, cursor } = forwardPage(args);
      return toConnection(
        await services.referenceTracking.listUpdates(caller.organizationId, reference.id, limit, cursor),
      );
    },
  },
  Mutation: {
    createReference: async (_, { input }, { caller, services }) => ({
      reference: await services.references.createReference(caller.organizationId, input),
    }),
    addTagsToReference: async (_, { input }, { caller, services, loaders }) => {
      const tags = await services.references.addTags(caller.organizationId, input.referenceId, input.tags);
      const reference = await services.references.getReference(caller.organizationId, input.referenceId);
      loaders.tagsByReferenceId.prime(reference.id, tags);
      return { reference };
    },
    removeTagFromReference: async (_, { input }, { caller, services }) => {
      await services.references.removeTag(caller.organizationId, input.referenceId, input.tagId);
      return { reference: await services.references.getReference(caller.organizationId, input.referenceId) };
    },
    deactivateReference: async (_, { input }, { caller, services }) => ({
      reference: await services.referenceTracking.deactivate(caller.organizationId, input.referenceId, input.reason),
    }),
    reactivateReference: async (_, { input }, { caller, services }) => ({
      reference: await services.referenceTracking.reactivate(caller.organizationId, input.referenceId),
    }),
    recordExtraction: async (_, { input }, { caller, services }) => ({
      reference: await services.referenceTracking.recordExtraction(caller.organizationId, input.referenceId, {
        status: input.status,
        error: input.error,
      }),
    }),
    recordReferenceUpdate: async (_, { input }, { caller, services }) => {
      const update = await services.referenceTracking.recordUpdate(
        caller.organizationId,
        input.referenceId,
        input.update,
      );
      return { update, reference: await services.references.getReference(caller.organizationId, update.referenceId) };
    },
    reportChildContainers: async (_, { input }, { caller, services }) => ({
      children: await services.references.reportChildren(caller.organizationId, input.referenceId, input.containerIds),
    }),
  },
};

/** Where each reference field's service input sits in its arguments (for `extensions.field`). */
export const referenceInputLocators: Readonly<Record<string, InputLocator>> = {
  "Query.references": underArgument(["filter"], { cursor: ["after"] }),
  // The service validates the update document itself: its paths are relative to `input.update`.
  "Mutation.recordReferenceUpdate": underArgument(["input", "update"]),
};
