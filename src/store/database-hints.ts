/*
 * Start-up failures an operator can fix in one step, said in one line instead of a stack trace: a PostgreSQL
 * database that does not exist (with the exact command that creates it) and a server that refuses connections.
 */

/** A database problem explained in one line; `cause` keeps the driver's error for logs. */
export class DatabaseSetupError extends Error {
  override readonly name = "DatabaseSetupError";
}

const UNDEFINED_DATABASE = "3D000"; // PostgreSQL's SQLSTATE for "database does not exist"

function errorCode(error: unknown): string | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const { code, errors } = error as { code?: unknown; errors?: unknown };
  if (typeof code === "string") return code;
  // Node's connect() reports every address it tried (IPv6 and IPv4 for localhost) as an AggregateError.
  return Array.isArray(errors) ? errorCode(errors[0]) : undefined;
}

function shellWord(word: string): string {
  return /^[\w.@%+=:,/-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * `error` as a {@link DatabaseSetupError} when it is a setup problem of the PostgreSQL database at `url`, else
 * `error` itself.
 */
export function explainDatabaseError(error: unknown, url: string): unknown {
  if (!url.startsWith("postgres://") && !url.startsWith("postgresql://")) return error;
  const parsed = new URL(url);
  const host = parsed.hostname || "localhost";
  const port = parsed.port || "5432";
  const code = errorCode(error);
  if (code === UNDEFINED_DATABASE) {
    const name = decodeURIComponent(parsed.pathname.slice(1));
    const user = decodeURIComponent(parsed.username);
    const command = ["createdb", "-h", host, "-p", port, ...(user ? ["-U", user] : []), name].map(shellWord).join(" ");
    return new DatabaseSetupError(
      `database "${name}" does not exist on ${host}:${port}; create it with \`${command}\` (or in psql: CREATE DATABASE "${name.replaceAll('"', '""')}";)`,
      { cause: error },
    );
  }
  if (code === "ECONNREFUSED") {
    return new DatabaseSetupError(
      `PostgreSQL refuses connections on ${host}:${port}; start it, or point DATABASE_URL at a running server`,
      { cause: error },
    );
  }
  return error;
}
