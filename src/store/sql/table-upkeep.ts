import type pg from "pg";

/*
 * Vacuum and analyze where PostgreSQL's autovacuum will not (PostgreSQL only).
 *
 * The service updates and deletes rows as it runs: every webhook delivery is inserted, leased and settled (three
 * versions of one row, and an attempt row written twice), the cost budget's rows change with every request, commit
 * rows and expired records are deleted. Clearing the dead versions, and keeping the planner's statistics in step
 * with tables that grow from nothing, is autovacuum's work. Where it is off (the server's `autovacuum = off`, or a
 * table's `autovacuum_enabled = false`) nothing did it: in the soak (issue 35, docs/benchmarks.md) the outbox's
 * indexes filled with dead entries that every claim and every count of pending deliveries read again, and within
 * 30 minutes webhooks' p99 went from 0.2 to 52 s and reads' from 0.13 to 2.8 s.
 *
 * So every VACUUM_CHECK_INTERVAL each instance reads the statistics of the schema's tables and, for each table
 * that autovacuum leaves alone, vacuums it once its dead rows pass the threshold below and analyzes it once enough
 * rows changed since its last analyze (autovacuum's own threshold, lower). `SKIP_LOCKED`: an instance never waits
 * for another's vacuum (or an operator's), it passes that table over until the next look. Where autovacuum is on, nothing is done here: tune
 * it there (docs/decisions.md, "Vacuum where autovacuum is off").
 */

/** Dead rows a table may hold before it is vacuumed: this many at least… */
const MIN_ROWS = 1_000;
/** …or this share of its live rows, whichever is more (autovacuum's default is 0.2; a queue wants less). */
const SHARE_OF_LIVE_ROWS = 0.05;
/**
 * Changed rows before a table is analyzed: autovacuum's own defaults (`autovacuum_analyze_threshold` 50 plus
 * `autovacuum_analyze_scale_factor` 0.1 of its rows). An analyze of a small table costs next to nothing, and a
 * small table without statistics misleads the planner most: `lifecycle_commits` holds one row per writing
 * transaction, so 100,000 events written in 200 bulk ingestions left it under the vacuum's 1,000 rows, never
 * analyzed, estimated at one row; the feed's read of 500 events was then planned as a sort of every event of the
 * organization (185 ms on 100,000 events) instead of an incremental sort that stops after two commits (1.2 ms),
 * and one organization's filtered scans held the instance's reads for seconds (issue 49.3).
 */
const ANALYZE_MIN_ROWS = 50;
const ANALYZE_SHARE_OF_LIVE_ROWS = 0.1;

/** Statements of one look: which tables to vacuum or analyze, as ready-quoted commands. */
const DUE_COMMANDS = `
  SELECT CASE WHEN s.n_dead_tup > GREATEST($1::int, $2::float8 * s.n_live_tup)
           THEN format('VACUUM (SKIP_LOCKED, ANALYZE) %I.%I', s.schemaname, s.relname)
           ELSE format('ANALYZE (SKIP_LOCKED) %I.%I', s.schemaname, s.relname) END AS "command"
  FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
  WHERE s.schemaname = current_schema()
    AND (current_setting('autovacuum') = 'off'
      OR COALESCE(c.reloptions, '{}') @> ARRAY['autovacuum_enabled=false']
      OR COALESCE(c.reloptions, '{}') @> ARRAY['autovacuum_enabled=off'])
    AND (s.n_dead_tup > GREATEST($1::int, $2::float8 * s.n_live_tup)
      OR s.n_mod_since_analyze > $3::int + $4::float8 * s.n_live_tup)`;

export interface TableUpkeepLog {
  info(details: object, message: string): void;
  error(details: object, message: string): void;
}

export class TableUpkeep {
  private pool: pg.Pool | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(
    private readonly databaseUrl: string,
    private readonly intervalMs: number,
    private readonly log: TableUpkeepLog,
  ) {}

  start(): void {
    if (this.timer || this.intervalMs === 0) return;
    this.timer = setInterval(() => void this.look(), this.intervalMs);
    this.timer.unref();
  }

  /** One look at the tables (the timer's; tests call it too). Resolves when its commands have run. */
  look(): Promise<void> {
    this.running ??= this.runDueCommands()
      .catch((error: unknown) => this.log.error({ err: error }, "vacuum where autovacuum is off failed"))
      .finally(() => (this.running = null));
    return this.running;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
    await this.pool?.end();
    this.pool = null;
  }

  private async runDueCommands(): Promise<void> {
    const pool = await this.connection();
    const { rows } = await pool.query<{ command: string }>(DUE_COMMANDS, [
      MIN_ROWS,
      SHARE_OF_LIVE_ROWS,
      ANALYZE_MIN_ROWS,
      ANALYZE_SHARE_OF_LIVE_ROWS,
    ]);
    for (const { command } of rows) {
      const started = performance.now();
      // One command at a time, on a connection of its own (VACUUM cannot run in a transaction block).
      await pool.query(command);
      this.log.info({ command, ms: Math.round(performance.now() - started) }, "vacuumed where autovacuum is off");
    }
  }

  /** A pool of one connection, opened on first use: servers on SQLite never load the driver for this. */
  private async connection(): Promise<pg.Pool> {
    if (this.pool) return this.pool;
    const { default: driver } = await import("pg");
    const pool = new driver.Pool({ connectionString: this.databaseUrl, max: 1, idleTimeoutMillis: 60_000 });
    // A connection the server ends between looks (a restart) must not end the process; the next look reconnects.
    pool.on("error", () => {});
    this.pool = pool;
    return pool;
  }
}
