import type { IngestedItem, RefusedItem } from "../domain/references/ingestion-service.ts";

/** A refused item's error as GraphQL shows it: what the same report alone would get in its `extensions`. */
export interface IngestionItemErrorModel {
  readonly code: string;
  readonly message: string;
  /** Where in the operation's arguments (`input.items.3.extraction.referenceId`). */
  readonly field: string | null;
}

/**
 * An item result of `Mutation.ingest` as its resolvers see it: a refused item carries its error already located
 * in the mutation's arguments, because only the mutation knows them.
 */
export type LocatedIngestionItemResult = IngestedItem | (RefusedItem & { readonly located: IngestionItemErrorModel });
