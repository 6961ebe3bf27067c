import type { DatabaseProvider } from "../database.ts";
import { Prisma } from "./sql-template.ts";

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
  const millis = utcMillis(text);
  if (millis !== undefined) return new Date(millis);
  return new Date(/(Z|[+-]\d\d:?\d\d)$/.test(text) ? text : `${text}Z`);
}

const digit = (text: string, index: number) => text.charCodeAt(index) - 48;
const digits2 = (text: string, index: number) => digit(text, index) * 10 + digit(text, index + 1);

/**
 * The instant of the forms the store writes and reads most (a page reads hundreds): `YYYY-MM-DDTHH:MM:SS.mmm`
 * followed by `Z` or `+00:00` (SQLite's columns and JSON) or by nothing (PostgreSQL's JSON, UTC), read by hand:
 * `Date`'s own parser costs several times as much. Anything else is left to it (undefined).
 */
function utcMillis(text: string): number | undefined {
  const length = text.length;
  if (length === 29) {
    if (!text.endsWith("+00:00")) return undefined;
  } else if (length === 24) {
    if (text.charCodeAt(23) !== 90 /* Z */) return undefined;
  } else if (length !== 23) return undefined;
  if (text[4] !== "-" || text[7] !== "-" || text[13] !== ":" || text[16] !== ":" || text[19] !== ".") return undefined;
  if (text[10] !== "T" && text[10] !== " ") return undefined;
  const year = digits2(text, 0) * 100 + digits2(text, 2);
  const millis = Date.UTC(
    year,
    digits2(text, 5) - 1,
    digits2(text, 8),
    digits2(text, 11),
    digits2(text, 14),
    digits2(text, 17),
    digit(text, 20) * 100 + digits2(text, 21),
  );
  if (Number.isNaN(millis)) return undefined;
  // Date.UTC reads the years 0–99 as 1900–1999; their leap years fall alike, so only the year is set again.
  return year < 100 ? new Date(millis).setUTCFullYear(year) : millis;
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
