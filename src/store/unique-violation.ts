/**
 * Whether a Prisma error is a unique-constraint violation: PostgreSQL's 23505 or SQLite's
 * SQLITE_CONSTRAINT_UNIQUE. Model queries surface it as P2002; raw queries through a driver adapter as P2010
 * with the adapter's mapped error in `meta.driverAdapterError`.
 */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== "object" || error === null) return false;
  const { code, meta } = error as { code?: unknown; meta?: Record<string, any> };
  if (code === "P2002") return true;
  const cause = meta?.driverAdapterError?.cause;
  return (
    cause?.kind === "UniqueConstraintViolation" ||
    cause?.originalCode === "23505" ||
    cause?.originalCode === "SQLITE_CONSTRAINT_UNIQUE"
  );
}
