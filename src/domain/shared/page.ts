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

/**
 * Builds a page from rows fetched with `limit + 1`: the extra row only tells that a next page exists.
 */
export function pageOf<T>(
  rows: readonly T[],
  limit: number,
  cursorOf: (item: T) => string,
  hasPreviousPage: boolean,
): Page<T> {
  const items = rows.slice(0, limit);
  const cursors = items.map(cursorOf);
  return { items, cursors, nextCursor: rows.length > limit ? (cursors.at(-1) ?? null) : null, hasPreviousPage };
}
