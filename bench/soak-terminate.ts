/* The soak's PostgreSQL fault: one of the server's connections terminated, as a failover or an idle reaper would. */
import pg from "pg";

const ADMIN_URL = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";

/**
 * Terminates one connection, picked at random, to the database of `databaseUrl` (an admin connection to another
 * database does it, so it is never its own). Returns the terminated connection's application_name ("" when it set
 * none), or null when there was none to terminate.
 */
export async function terminateOneConnection(databaseUrl: string): Promise<string | null> {
  const name = decodeURIComponent(new URL(databaseUrl).pathname.slice(1));
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  try {
    const result = await admin.query<{ application_name: string }>(
      `SELECT application_name, pg_terminate_backend(pid) FROM pg_stat_activity
       WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'
       ORDER BY random() LIMIT 1`,
      [name],
    );
    return result.rows[0]?.application_name ?? null;
  } finally {
    await admin.end();
  }
}
