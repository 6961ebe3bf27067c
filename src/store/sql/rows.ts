import type { DatabaseProvider } from "../database.ts";
import { Prisma } from "./sql-template.ts";
import { storedDate } from "./stored-dates.ts";

/*
 * Hot paths are one statement each: every statement through Prisma costs far more in the client
 * than in the database (docs/decisions.md, "Data path"), and a raw statement skips the query compiler. Raw
 * rows come back with the driver's types, which differ by provider: booleans as 0/1 and JSON as text on
 * SQLite, timestamps inside JSON without a zone on PostgreSQL. The helpers below read either.
 */

/** A timestamp column or a timestamp inside aggregated JSON. PostgreSQL's JSON drops the zone: it is UTC. */
export function toDate(value: unknown): Date {
  if (value instanceof Date) return value;
  const text = String(value);
  const stored = storedDate(text);
  if (stored !== undefined) return stored;
  return new Date(/(Z|[+-]\d\d:?\d\d)$/.test(text) ? text : `${text}Z`);
}

export function toNullableDate(value: unknown): Date | null {
  return value === null || value === undefined ? null : toDate(value);
}

export function toBoolean(value: unknown): boolean {
  return typeof value === "boolean" ? value : Number(value) !== 0;
}

export function fromJson(value: unknown): unknown {
  return typeof value === "string" ? JSON.parse(value) : value;
}

/** A JSON parameter: text on SQLite, jsonb on PostgreSQL. */
export function jsonParameter(provider: DatabaseProvider, value: unknown): Prisma.Sql {
  const text = JSON.stringify(value);
  return provider === "postgres" ? Prisma.sql`CAST(${text} AS JSONB)` : Prisma.sql`${text}`;
}

/** A date parameter inside an expression whose type PostgreSQL cannot infer from a column (a CASE branch). */
export function timestampParameter(provider: DatabaseProvider, value: Date | null): Prisma.Sql {
  return provider === "postgres" ? Prisma.sql`CAST(${value} AS TIMESTAMP(3))` : Prisma.sql`${value}`;
}

/**
 * SQLite's largest number of bound parameters per statement is 32,766 (3.32+); multi-row INSERTs are cut in
 * chunks that stay well under it on both databases (PostgreSQL allows 65,535).
 */
const MAX_PARAMETERS_PER_STATEMENT = 30_000;

/** `items` cut in chunks of at most MAX_PARAMETERS_PER_STATEMENT parameters, `parametersPerItem` each. */
export function chunksOf<T>(items: readonly T[], parametersPerItem: number): T[][] {
  const size = Math.max(1, Math.floor(MAX_PARAMETERS_PER_STATEMENT / parametersPerItem));
  const chunks: T[][] = [];
  for (let start = 0; start < items.length; start += size) chunks.push(items.slice(start, start + size));
  return chunks;
}
