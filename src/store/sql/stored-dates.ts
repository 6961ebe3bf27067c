import { FormattedDate } from "../../domain/shared/date-time.ts";

/*
 * Timestamps as the store keeps them, read by hand (rows.ts reads every column through here; the PostgreSQL
 * executor its `timestamp` columns): without imports from the rest of the store, so that the executors can use it.
 */

const digit = (text: string, index: number) => text.charCodeAt(index) - 48;
const digits2 = (text: string, index: number) => digit(text, index) * 10 + digit(text, index + 1);

/** The positions of the digits of `YYYY-MM-DD?HH:MM:SS`. */
const DATE_TIME_DIGITS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18];

function digitsAt(text: string, from: number, to: number): boolean {
  for (let index = from; index < to; index++) {
    const code = text.charCodeAt(index);
    if (code < 48 || code > 57) return false;
  }
  return true;
}

const MILLIS_PADDING = ["000", "00", "0", ""];
const MILLIS_SCALE = [100, 10, 1];

/**
 * The forms the store writes and reads most (a page reads hundreds), read by hand, as a FormattedDate: its ISO
 * text is the stored text, reshaped, so that writing it to a response formats nothing. `Date`'s own parser costs
 * several times as much, and `toISOString` ten times a Date's construction. The forms: `YYYY-MM-DD?HH:MM:SS`,
 * `?` a `T` or a space, then
 * - `.mmm` and `Z` or `+00:00` (SQLite's columns and JSON, written by the store or by Prisma's adapter),
 * - `.mmm` and nothing (PostgreSQL's JSON, UTC),
 * - a fraction of 0 to 3 digits and nothing (PostgreSQL's `timestamp(3)` columns, UTC: trailing zeros dropped).
 * Anything else, or a date that does not exist, is left to `Date` (undefined).
 */
export function storedDate(text: string): Date | undefined {
  const length = text.length;
  let fraction: number;
  if (length === 29) {
    if (!text.endsWith("+00:00")) return undefined;
    fraction = 3;
  } else if (length === 24) {
    if (text.charCodeAt(23) !== 90 /* Z */) return undefined;
    fraction = 3;
  } else if (length === 23) fraction = 3;
  else if (length === 22 || length === 21) fraction = length - 20;
  else if (length === 19) fraction = 0;
  else return undefined;
  if (text[4] !== "-" || text[7] !== "-" || text[13] !== ":" || text[16] !== ":") return undefined;
  const separator = text[10];
  if (separator !== "T" && separator !== " ") return undefined;
  for (const index of DATE_TIME_DIGITS) {
    const code = text.charCodeAt(index);
    if (code < 48 || code > 57) return undefined;
  }
  if (fraction > 0 && (text[19] !== "." || !digitsAt(text, 20, 20 + fraction))) return undefined;
  const year = digits2(text, 0) * 100 + digits2(text, 2);
  const month = digits2(text, 5);
  const day = digits2(text, 8);
  const hours = digits2(text, 11);
  const minutes = digits2(text, 14);
  const seconds = digits2(text, 17);
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  if (hours > 23 || minutes > 59 || seconds > 59) return undefined;
  let millis = 0;
  for (let index = 0; index < fraction; index++) millis += digit(text, 20 + index) * MILLIS_SCALE[index]!;
  let instant = Date.UTC(year, month - 1, day, hours, minutes, seconds, millis);
  // Date.UTC reads the years 0–99 as 1900–1999; their leap years fall alike, so only the year is set again.
  if (year < 100) instant = new Date(instant).setUTCFullYear(year);
  return new FormattedDate(instant, isoText(text, separator, fraction));
}

/** `toISOString()`'s text for a date-time storedDate has checked. */
function isoText(text: string, separator: string, fraction: number): string {
  if (separator === "T" && fraction === 3) return text.length === 24 ? text : `${text.slice(0, 23)}Z`;
  const head = separator === "T" ? text.slice(0, 19) : `${text.slice(0, 10)}T${text.slice(11, 19)}`;
  return `${head}.${text.slice(20, 20 + fraction)}${MILLIS_PADDING[fraction]}Z`;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}
