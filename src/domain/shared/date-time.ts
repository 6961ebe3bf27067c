/**
 * SPEC §4: inputs accept an ISO 8601 date-time with an offset (`Z` or `±hh:mm`); anything else, including a
 * date-time without an offset, is rejected. Outputs are always UTC with milliseconds (`Date#toISOString`).
 */
const DATE_TIME_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:[Zz]|[+-]\d{2}:?\d{2})$/;

export function parseDateTime(value: unknown): Date | null {
  if (typeof value !== "string" || !DATE_TIME_WITH_OFFSET.test(value)) return null;
  const [datePart] = value.split(/[Tt]/);
  const [year, month, day] = datePart!.split("-").map(Number);
  const date = new Date(value);
  if (Number.isNaN(date.getTime())) return null;
  // Date.parse rolls 2026-02-30 over to March; reject calendar dates that do not exist.
  const probe = new Date(Date.UTC(year!, month! - 1, day!));
  if (probe.getUTCMonth() !== month! - 1 || probe.getUTCDate() !== day) return null;
  return date;
}

export function formatDateTime(date: Date): string {
  return date.toISOString();
}
