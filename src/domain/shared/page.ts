/** One page of a keyset-paginated listing. `nextCursor` is null on the last page. */
export interface Page<T> {
  readonly items: readonly T[];
  readonly nextCursor: string | null;
  /** Cursor of each item, in order (GraphQL edges need one per item). */
  readonly cursors: readonly string[];
  readonly hasPreviousPage: boolean;
}

export const MAX_PAGE_SIZE = 500;
export const DEFAULT_PAGE_SIZE = 50;
