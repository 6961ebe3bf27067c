/*
 * Whether an error means "the database cannot be reached right now" (a connection lost mid-request, the server
 * restarting or refusing connections, every connection busy, SQLite's write lock held past busy_timeout, a
 * write that kept losing races with concurrent ones: ContendedUnitError) rather than a bug. Callers answer these
 * with 503 and Retry-After instead of 500: the same request is expected to succeed once the database is back.
 *
 * Errors reach the adapters in several wrappings (the driver's own error, Prisma's DriverAdapterError with
 * a `cause`, a PrismaClientKnownRequestError with `meta.driverAdapterError`, graphql-js's NonErrorThrown with
 * `thrownValue` when the driver's error is not an `Error` of this realm, as under jest's module VM), so the
 * whole chain is examined.
 */

/** Prisma's codes for an unreachable or overloaded database (P1001 unreachable, P1008 timed out, P1017 closed...). */
const PRISMA_CODES = new Set(["P1001", "P1002", "P1008", "P1017", "P2024", "P2037"]);
/** The driver adapters' error kinds behind those codes. */
const ADAPTER_KINDS = new Set(["DatabaseNotReachable", "SocketTimeout", "ConnectionClosed", "TooManyConnections"]);
/**
 * PostgreSQL SQLSTATEs: class 08 (connection exception), 57P01-57P03 (admin or crash shutdown, cannot connect
 * now), 53300 (too many connections); SQLite result codes for a lock held too long or a file that cannot be
 * opened or read; socket errors.
 */
const DRIVER_CODES =
  /^(?:08[0-9A-Z]{3}|57P0[1-3]|53300|SQLITE_BUSY.*|SQLITE_CANTOPEN.*|SQLITE_IOERR.*|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND)$/;
/** node-postgres reports a socket closed under it with these messages and no code. */
const DRIVER_MESSAGES =
  /Connection terminated|Client has encountered a connection error|timeout exceeded when trying to connect|Can't reach database server/i;

/**
 * A unit of work the database kept aborting in favour of concurrent ones (a deadlock or a serialization failure
 * at every attempt, see src/store/sql/unit-retry.ts). Nothing of it committed, and the same request sent again a
 * moment later is expected to succeed: it is answered as an outage is, 503 with Retry-After.
 */
export class ContendedUnitError extends Error {
  override readonly name = "ContendedUnitError";

  constructor(attempts: number, cause: unknown) {
    super(`the unit of work lost a race with concurrent transactions ${attempts} times in a row`, { cause });
  }
}

export function isDatabaseUnavailableError(error: unknown): boolean {
  const seen = new Set<unknown>();
  const pending: unknown[] = [error];
  while (pending.length > 0 && seen.size < 10) {
    const current = pending.pop();
    if (current === null || typeof current !== "object" || seen.has(current)) continue;
    seen.add(current);
    const record = current as Record<string, unknown>;
    if (record.name === "PrismaClientInitializationError" || record.name === "ContendedUnitError") return true;
    for (const code of [record.code, record.originalCode]) {
      if (typeof code !== "string") continue;
      if (PRISMA_CODES.has(code) || DRIVER_CODES.test(code)) return true;
    }
    if (typeof record.kind === "string" && ADAPTER_KINDS.has(record.kind)) return true;
    for (const message of [record.message, record.originalMessage]) {
      if (typeof message === "string" && DRIVER_MESSAGES.test(message)) return true;
    }
    pending.push(
      record.cause,
      record.thrownValue,
      (record.meta as Record<string, unknown> | undefined)?.driverAdapterError,
    );
  }
  return false;
}
