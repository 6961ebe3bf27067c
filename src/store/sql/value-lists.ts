import type { DatabaseProvider } from "../database.ts";
import { Prisma } from "./sql-template.ts";

/*
 * A list of values as one bound parameter: an array on PostgreSQL, a JSON array on SQLite. `IN (?, ?, …)` with
 * one placeholder per value gives one SQL text per length, and every text is a statement the executors prepare
 * and keep (statement-cache.ts): a client choosing the length of a filter list chose how many statements the
 * server held (issue 34). With the list bound as one value, a statement has one text whatever the list's length.
 *
 * Plans stay index lookups: PostgreSQL probes an index once per element of `= ANY(array)`; SQLite reads the
 * JSON array into an ephemeral table and probes the index once per row of it (docs/decisions.md, "One text
 * per statement").
 */

/** The values, bound as one parameter, as a table of one column `value`. */
export function valueTable(provider: DatabaseProvider, values: readonly string[]): Prisma.Sql {
  return provider === "postgres"
    ? Prisma.sql`unnest(CAST(${[...values]} AS TEXT[])) AS "listed" ("value")`
    : Prisma.sql`json_each(${JSON.stringify(values)}) AS "listed"`;
}

/** `expression` is one of `values` (text), the list bound as one parameter. */
export function isOneOf(provider: DatabaseProvider, expression: Prisma.Sql, values: readonly string[]): Prisma.Sql {
  return provider === "postgres"
    ? Prisma.sql`${expression} = ANY(CAST(${[...values]} AS TEXT[]))`
    : Prisma.sql`${expression} IN (SELECT "value" FROM json_each(${JSON.stringify(values)}))`;
}

/** `expression` is none of `values` (text), the list bound as one parameter. */
export function isNoneOf(provider: DatabaseProvider, expression: Prisma.Sql, values: readonly string[]): Prisma.Sql {
  return provider === "postgres"
    ? Prisma.sql`NOT (${expression} = ANY(CAST(${[...values]} AS TEXT[])))`
    : Prisma.sql`${expression} NOT IN (SELECT "value" FROM json_each(${JSON.stringify(values)}))`;
}
