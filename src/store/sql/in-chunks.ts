/**
 * The most values the store puts in one SQL `IN (...)` list. Prisma refuses a statement with more bound
 * parameters than the database takes (999 on SQLite), so a long list is sent as several statements of at
 * most this many values each; the other parameters of a statement stay well under the rest.
 */
export const MAX_IN_LIST_VALUES = 500;

/**
 * Runs `find` once per chunk of at most {@link MAX_IN_LIST_VALUES} values and concatenates the rows, in chunk
 * order. One statement for the usual short list, as before. Only for lookups whose rows are independent of
 * each other (by id, by key): a LIMIT or an ORDER BY across the whole list does not survive chunking.
 */
export async function findInChunks<V, R>(
  values: readonly V[],
  find: (chunk: V[]) => Promise<readonly R[]>,
): Promise<R[]> {
  if (values.length <= MAX_IN_LIST_VALUES) return [...(await find([...values]))];
  const rows: R[] = [];
  for (let start = 0; start < values.length; start += MAX_IN_LIST_VALUES) {
    rows.push(...(await find(values.slice(start, start + MAX_IN_LIST_VALUES))));
  }
  return rows;
}
