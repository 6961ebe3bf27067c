/** An input object with its `null` fields left out. */
export type WithoutNulls<T> = { [K in keyof T]?: Exclude<T[K], null> };

/**
 * GraphQL passes an input field the client set to `null` as `null`; the services read "not given" as
 * `undefined`. Both mean "no filter" here, so nulls are dropped.
 */
export function withoutNulls<T extends object>(input: T | null | undefined): WithoutNulls<T> {
  if (!input) return {};
  return Object.fromEntries(Object.entries(input).filter(([, value]) => value !== null)) as WithoutNulls<T>;
}
