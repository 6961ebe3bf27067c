/**
 * Inputs accept an ISO 8601 date-time with an offset (`Z` or `±hh:mm`); anything else, including a date-time
 * without an offset, is rejected. Outputs are always UTC with milliseconds (`Date#toISOString`).
 *
 * Within ISO 8601, RFC 3339 (its internet profile) decides the edges: the separator `T` and the zone `Z` may be
 * lowercase (`2026-11-22t02:49:01z`), and the hour is 00 to 23. ISO 8601's `24:00` (the end of a day) is
 * refused: JavaScript's Date reads it as the next day's midnight, so it would be stored as another date than
 * the one written. Every date-time input (update documents, query parameters, GraphQL's DateTime, recovery
 * windows) goes through {@link parseDateTime}.
 *
 * The instant must fall within years 0001 to 9999 in UTC (0001-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z):
 * what both databases store and give back alike (PostgreSQL's timestamp has no year 0, and its text form,
 * like ISO 8601's, has four-digit years), so a date outside is refused on both rather than failing on one.
 */
const DATE_TIME_WITH_OFFSET =
  /^\d{4}-\d{2}-\d{2}[Tt](?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:?\d{2})$/;

const EARLIEST_DATE_TIME_MS = Date.parse("0001-01-01T00:00:00.000Z");
const LATEST_DATE_TIME_MS = Date.parse("9999-12-31T23:59:59.999Z");

export function parseDateTime(value: unknown): Date | null {
  if (typeof value !== "string" || !DATE_TIME_WITH_OFFSET.test(value)) return null;
  const [datePart] = value.split(/[Tt]/);
  const [year, month, day] = datePart!.split("-").map(Number);
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return null;
  if (date.getTime() < EARLIEST_DATE_TIME_MS || date.getTime() > LATEST_DATE_TIME_MS) return null;
  // Date.parse rolls 2026-02-30 over to March; reject calendar dates that do not exist.
  const probe = new Date(Date.UTC(year!, month! - 1, day!));
  if (probe.getUTCMonth() !== month! - 1 || probe.getUTCDate() !== day) return null;
  return date;
}

export function formatDateTime(date: Date): string {
  return date.toISOString();
}

/**
 * A Date made together with its `toISOString()` text, by a reader that had the text at hand (the store reads
 * timestamps stored as that text, or nearly: src/store/sql/rows.ts): formatting it again costs nothing, where
 * `Date#toISOString` costs about ten times a Date's construction. A REST page of 50 references formats 100 to
 * 200 of them, a GraphQL page of events one per edge and one more per cursor. Every caller of `toISOString` (or
 * `JSON.stringify`, through `toJSON`) gets the text; one that changes the instant (a setter) gets it formatted
 * afresh.
 */
export class FormattedDate extends Date {
  readonly #millis: number;
  readonly #iso: string;

  /** `iso` must be exactly what `new Date(millis).toISOString()` gives. */
  constructor(millis: number, iso: string) {
    super(millis);
    this.#millis = millis;
    this.#iso = iso;
  }

  override toISOString(): string {
    return this.getTime() === this.#millis ? this.#iso : super.toISOString();
  }
}
