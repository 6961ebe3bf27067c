/*
 * When a unit of work lost a race on PostgreSQL: the database aborted its transaction to break a deadlock
 * (SQLSTATE 40P01) or because it could not serialize it (40001). Nothing of the unit committed, and the same unit
 * run again usually succeeds, so the unit of work (sql-store.ts) runs it again, a few times, after a short
 * randomized wait that keeps the two sides of the cycle from meeting again at once. SQLite runs one write
 * transaction at a time and never reports either.
 */

/** How many times a unit of work runs at most: the first run and three more. */
export const UNIT_ATTEMPTS = 4;

/** The SQLSTATEs of a transaction the database aborted so that another could go on. */
const CONFLICT_CODES = new Set(["40P01", "40001"]);

/** Whether `error` (or an error it wraps) is a deadlock or a serialization failure. */
export function isTransactionConflict(error: unknown): boolean {
  let current = error;
  for (let depth = 0; depth < 5 && current !== null && typeof current === "object"; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === "string" && CONFLICT_CODES.has(code)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * The wait before run `attempt + 1`: 10, 20, 40 ms, each drawn between half and the whole of it. A deadlock is
 * found after PostgreSQL's deadlock_timeout (1 s by default) of waiting, so these waits are small beside it.
 */
export function retryDelayMs(attempt: number, random: () => number = Math.random): number {
  const ceiling = 10 * 2 ** (attempt - 1);
  return ceiling / 2 + random() * (ceiling / 2);
}
