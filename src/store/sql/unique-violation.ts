/**
 * Whether an error is a unique-constraint violation: PostgreSQL's 23505 or SQLite's SQLITE_CONSTRAINT_UNIQUE
 * (or _PRIMARYKEY). Statements on the driver surface the driver's own error (its `code`); Prisma's model
 * queries surface it as P2002, raw queries through a driver adapter as P2010 with the adapter's mapped error
 * in `meta.driverAdapterError`.
 */
const UNIQUE_VIOLATION_CODES = new Set(["23505", "SQLITE_CONSTRAINT_UNIQUE", "SQLITE_CONSTRAINT_PRIMARYKEY"]);

export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const { code, meta } = error as { code?: unknown; meta?: Record<string, any> };
  if (code === "P2002" || (typeof code === "string" && UNIQUE_VIOLATION_CODES.has(code))) return true;
  const cause = meta?.driverAdapterError?.cause;
  return cause?.kind === "UniqueConstraintViolation" || UNIQUE_VIOLATION_CODES.has(cause?.originalCode);
}
