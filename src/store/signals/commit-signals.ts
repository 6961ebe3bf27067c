import type pg from "pg";
import type { LifecycleEvent } from "../../domain/lifecycle/lifecycle-event.ts";
import type { CommitSignalListener, CommitSignals } from "../../domain/live/live-feed-ports.ts";
import type { Database } from "../database.ts";

/*
 * Commit signals: "organization X committed events". They only wake readers up early; readers also poll the
 * log, so a lost signal delays an event by at most one poll interval and loses nothing.
 *
 * - SQLite: one process owns the database, so signals stay in the process: the unit of work publishes them
 *   after COMMIT.
 * - PostgreSQL: the database itself sends them. The trigger that numbers a transaction's events at COMMIT
 *   (migration 0006) also runs `pg_notify` on LIFECYCLE_CHANNEL with the organization id, which PostgreSQL
 *   delivers when the transaction commits, to every instance LISTENing, this one included. So every instance
 *   hears of every commit, whichever process wrote it, with no statement after the commit and nothing lost when
 *   a writer dies between its COMMIT and a NOTIFY of its own. `publish` only stands in for the database while
 *   the LISTEN connection is down, for this instance's own commits. Each instance LISTENs over a dedicated
 *   connection (outside Prisma's pool, which cannot hold a session open).
 *
 * The listener is written against `pg` directly rather than with `pg-listen` (issue 12 asked): what is left is
 * one LISTEN, reconnecting with backoff, and reading the log at once after a reconnect (the commits it missed),
 * about 50 lines below.
 */

/** The channel named in migration 0006's trigger. */
export const LIFECYCLE_CHANNEL = "reftrail_lifecycle_events";

export interface NotifierLog {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

/** Signals for `database`: in-process on SQLite, LISTEN/NOTIFY on PostgreSQL. */
export async function openCommitSignals(database: Database, log: NotifierLog): Promise<CommitSignals> {
  if (database.provider === "sqlite") return new InProcessCommitSignals(log);
  const signals = new PostgresCommitSignals(database.url, log);
  await signals.start();
  return signals;
}

class InProcessCommitSignals implements CommitSignals {
  readonly crossProcess: boolean = false;
  private readonly listeners = new Set<CommitSignalListener>();

  constructor(protected readonly log: NotifierLog) {}

  publish(events: readonly LifecycleEvent[]): void {
    for (const organizationId of new Set(events.map((event) => event.organizationId))) this.emit(organizationId);
  }

  onSignal(listener: CommitSignalListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    this.listeners.clear();
  }

  protected emit(organizationId: string | null): void {
    for (const listener of this.listeners) {
      try {
        listener(organizationId);
      } catch (error) {
        // A listener's failure must never reach the writer that published the signal.
        this.log.error({ err: error }, "a commit signal listener failed");
      }
    }
  }
}

const MAX_RECONNECT_DELAY_MS = 5_000;

class PostgresCommitSignals extends InProcessCommitSignals {
  override readonly crossProcess = true;
  private client: pg.Client | undefined;
  private listening = false;
  private closed = false;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private reconnectDelayMs = 100;

  constructor(
    private readonly url: string,
    log: NotifierLog,
  ) {
    super(log);
  }

  /** Connects and listens; on failure keeps retrying in the background (polling covers the meantime). */
  async start(): Promise<void> {
    await this.connect();
  }

  /** The database signals every commit itself (see above); without a LISTEN connection, wake this instance. */
  override publish(events: readonly LifecycleEvent[]): void {
    if (!this.listening) super.publish(events);
  }

  override async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    await super.close();
    const client = this.client;
    this.client = undefined;
    if (client) await client.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    // Loaded here: a process on SQLite never needs the PostgreSQL driver. Closed meanwhile: nothing to open.
    const { default: pg } = await import("pg");
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.url, application_name: "reftrail-lifecycle-signals" });
    this.client = client;
    client.on("notification", (message) => {
      // The payload is an organization id.
      if (message.channel === LIFECYCLE_CHANNEL && message.payload) this.emit(message.payload);
    });
    client.on("error", (error) => this.lost(client, error));
    client.on("end", () => this.lost(client, undefined));
    try {
      await client.connect();
      await client.query(`LISTEN ${LIFECYCLE_CHANNEL}`);
      this.listening = true;
      if (this.reconnectDelayMs > 100) this.log.info({}, "lifecycle commit signals reconnected");
      this.reconnectDelayMs = 100;
      // Whatever was committed while we were not listening: read the log now rather than at the next poll.
      this.emit(null);
    } catch (error) {
      this.lost(client, error);
    }
  }

  private lost(client: pg.Client, error: unknown): void {
    if (client !== this.client || this.closed) return;
    this.client = undefined;
    this.listening = false;
    client.removeAllListeners("notification");
    client.end().catch(() => undefined);
    this.log.warn(
      { err: error, retryInMs: this.reconnectDelayMs },
      "lifecycle commit signals disconnected; polling until reconnected",
    );
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => void this.connect(), this.reconnectDelayMs);
    this.reconnectTimer.unref();
    this.reconnectDelayMs = Math.min(this.reconnectDelayMs * 2, MAX_RECONNECT_DELAY_MS);
  }
}
