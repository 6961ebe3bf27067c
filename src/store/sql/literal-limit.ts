import { Prisma } from "./sql-template.ts";

/**
 * A LIMIT written into the statement's text rather than bound as a parameter, for two reasons, one per database:
 *
 * - SQLite (3.53, as bundled by better-sqlite3) reads the value bound to a LIMIT while it plans, and so marks the
 *   prepared statement to be compiled again whenever that parameter is bound — on every execution, even with the
 *   same value. A REST page of references spent two fifths of its read thread's instructions compiling its
 *   statement anew (counted with callgrind: 450,000 of 1,145,000 per page); with the LIMIT in the text each
 *   statement is compiled once and kept by the statement cache.
 * - PostgreSQL plans a prepared statement for its values at first, then keeps one generic plan when that costs
 *   about the same; with the LIMIT a parameter, the generic plan of the reference-with-events statement is costed
 *   for an unknown number of rows (70 against 38) and was never chosen: every execution was planned anew, 0.47 ms
 *   of planning for 0.2 ms of execution. With the LIMIT in the text the generic plan (cost 16) is chosen after
 *   five executions.
 *
 * A limit is an integer from 1 to the API's maximum page plus one, or a fixed batch size of the server's own, so
 * the texts stay few, and both statement caches are bounded (statement-cache.ts).
 */
export function literalLimit(limit: number): Prisma.Sql {
  if (!Number.isSafeInteger(limit) || limit < 0) throw new RangeError(`a limit must be a whole number: ${limit}`);
  return Prisma.raw(String(limit));
}
