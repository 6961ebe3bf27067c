import type { IngestionItemInput as DomainItem } from "../../domain/references/ingestion-service.ts";
import { isUuid } from "../../domain/shared/ids.ts";
import type { IngestionItemInput, Resolvers } from "../__generated__/resolvers-types.ts";
import { toGraphqlError, type InputLocator } from "../../pipeline/errors/graphql-errors.ts";
import type { GraphQLError } from "graphql";
import type { LocatedIngestionItemResult } from "../ingestion-results.ts";

/** The `@oneOf` field an item sets: its kind, in the domain's words. */
const KIND_BY_FIELD = {
  extraction: "extraction",
  update: "update",
  deactivate: "deactivate",
  reactivate: "reactivate",
} as const;

function toDomainItem(item: IngestionItemInput): DomainItem {
  for (const field of Object.keys(KIND_BY_FIELD) as (keyof typeof KIND_BY_FIELD)[]) {
    const fields = item[field];
    if (fields) return { kind: KIND_BY_FIELD[field], ...fields };
  }
  // @oneOf guarantees one field; an item without one is left for the service to refuse.
  return {};
}

/**
 * The domain's item paths (`["items", 3, "error", "code"]`) in `ingest`'s arguments, where each item's fields sit
 * under its `@oneOf` field: `input.items.3.extraction.error.code`.
 */
const locateIngestionInput: InputLocator = (domainPath, args) => {
  const [head, index, ...rest] = domainPath;
  if (head !== "items" || typeof index !== "number") return ["input", ...domainPath];
  const items = (args.input as { items?: readonly Record<string, unknown>[] } | undefined)?.items;
  const field = Object.keys(items?.[index] ?? {}).find((key) => items?.[index]?.[key] != null);
  return ["input", "items", index, ...(field ? [field] : []), ...rest];
};

/** Bulk ingestion (issue 8): a thin adapter over IngestionService. */
export const ingestionResolvers: Resolvers = {
  Mutation: {
    ingest: async (_, args, { caller, services }) => {
      const result = await services.ingestion.ingest(caller.organizationId, {
        items: args.input.items.map(toDomainItem),
        mode: args.input.mode ?? undefined,
      });
      const results: LocatedIngestionItemResult[] = result.items.map((item) => {
        if (item.ok) return item;
        // The error the same report would get alone; a plain object, since graphql-js treats a returned Error as
        // a failure of the field.
        const { message, extensions } = toGraphqlError(item.error, locateIngestionInput, args) as GraphQLError;
        const field = typeof extensions.field === "string" ? extensions.field : null;
        return { ...item, located: { code: String(extensions.code), message, field } };
      });
      return {
        mode: result.mode,
        succeeded: result.succeeded,
        failed: result.failed,
        eventCount: result.eventCount,
        results,
      };
    },
  },
  IngestionItemResult: {
    referenceId: (item) => item.referenceId ?? "",
    reference: (item, _, { loaders }) =>
      item.referenceId !== null && isUuid(item.referenceId)
        ? loaders.referenceById.load(item.referenceId.toLowerCase())
        : null,
    events: (item) => (item.ok ? [...item.events] : []),
    update: (item) => (item.ok ? item.update : null),
    error: (item) => (item.ok ? null : item.located),
  },
};

/** Where `ingest`'s service input sits in its arguments (for `extensions.field`). */
export const ingestionInputLocators: Readonly<Record<string, InputLocator>> = {
  "Mutation.ingest": locateIngestionInput,
};
