import { TAG_SNAPSHOTS_NOT_READ, type TagSnapshot } from "../../domain/lifecycle/lifecycle-event.ts";
import { DEFAULT_PAGE_SIZE } from "../../domain/shared/page.ts";
import type { Resolvers } from "../__generated__/resolvers-types.ts";
import { withoutNulls } from "../arguments.ts";
import { underArgument, type InputLocator } from "../../pipeline/errors/graphql-errors.ts";
import { bidirectionalPage, toBackwardConnection, toConnection } from "../pagination.ts";
import { takeFirstEvents } from "./prefetched-events.ts";

/**
 * The lifecycle log as `Reference.events`, the organization's whole log in live order (`Query.lifecycleEvents`,
 * the feed to poll), and the event's own relations.
 */
export const lifecycleResolvers: Resolvers = {
  Query: {
    lifecycleEvents: async (_root, args, { caller, services }) => {
      const page = await services.eventFeed.readPage(caller.organizationId, {
        ...withoutNulls(args.filter),
        // 50 by default, like every connection (and the cost estimate, limits.ts); REST's default is 100.
        limit: args.first ?? DEFAULT_PAGE_SIZE,
        after: args.after ?? null,
      });
      const cursors = page.cursors;
      return {
        edges: page.events.map((node, index) => ({ cursor: cursors[index]!, node })),
        pageInfo: {
          hasNextPage: page.hasMore,
          hasPreviousPage: args.after !== undefined && args.after !== null,
          startCursor: cursors[0] ?? null,
          endCursor: cursors.at(-1) ?? null,
        },
        nextCursor: page.nextCursor,
      };
    },
  },
  Reference: {
    // One service call per reference: each reference's log is its own keyset listing. A list of N references
    // asking for events costs N small indexed queries; the cost limit bounds N times the page size.
    // Unless Query.reference read the page with the reference (prefetched-events.ts).
    events: async (reference, args, { caller, services }) => {
      const page = bidirectionalPage(args);
      const prefetched = takeFirstEvents(reference, args);
      if (prefetched !== undefined) {
        return page.direction === "forward" ? toConnection(prefetched) : toBackwardConnection(prefetched);
      }
      const events = await services.lifecycleLog.listEvents(caller.organizationId, reference.id, {
        ...withoutNulls(args.filter),
        // The connection is the log in ascending order; `last`/`before` reads it backward from `before` (newest
        // first) and the connection puts the page back in order. Cursors are the same whichever the direction.
        order: "asc",
        backward: page.direction === "backward",
        limit: page.limit,
        ...(page.cursor !== undefined && { cursor: page.cursor }),
      });
      return page.direction === "forward" ? toConnection(events) : toBackwardConnection(events);
    },
  },
  LifecycleEvent: {
    // A page read without its tag snapshots (prefetched-events.ts) is only taken by a selection without this field.
    referenceTags: (event) => {
      if (event.referenceTags === TAG_SNAPSHOTS_NOT_READ) {
        throw new Error(`event ${event.id} was read without its tag snapshot for a selection that asks for it`);
      }
      // Read only by the executor: the codegen's type asks for a mutable list.
      return event.referenceTags as TagSnapshot[];
    },
    reference: async (event, _, { loaders }) => {
      const reference = await loaders.referenceById.load(event.referenceId);
      // References are never deleted, so an event always has one; a miss is a bug, reported as such.
      if (!reference) throw new Error(`reference ${event.referenceId} of event ${event.id} not found`);
      return reference;
    },
  },
};

/** Where `Reference.events`' service input sits in its arguments (for `extensions.field`). */
export const lifecycleInputLocators: Readonly<Record<string, InputLocator>> = {
  "Query.lifecycleEvents": underArgument(["filter"], { after: ["after"], limit: ["first"], type: ["filter", "types"] }),
  "Reference.events": underArgument(["filter"], {
    type: ["filter", "types"],
    cursor: (args) => [args.before ? "before" : "after"],
  }),
};
