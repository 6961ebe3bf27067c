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
  const last = items.at(-1);
  const nextCursor = rows.length > limit && last !== undefined ? cursorOf(last) : null;
  let cursors: readonly string[] | undefined;
  return {
    items,
    // Signed lazily: a REST page needs only `nextCursor`, and signing 50 cursors it never sends cost the event
    // loop more than the page's statement. The last item's cursor is `nextCursor` when there is one: signed once.
    get cursors() {
      cursors ??= items.map((item, index) =>
        nextCursor !== null && index === items.length - 1 ? nextCursor : cursorOf(item),
      );
      return cursors;
    },
    nextCursor,
    hasPreviousPage,
  };
}
