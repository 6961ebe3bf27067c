import pg from "pg";
import type { LifecycleEvent } from "../domain/lifecycle/lifecycle-event.ts";
import type { CommitSignalListener, CommitSignals } from "../domain/live/live-feed.ts";
import type { Database } from "./database.ts";

/*
 * Commit signals: "organization X committed events". They only wake readers up early; readers also poll the
 * log, so a lost signal delays an event by at most one poll interval and loses nothing.
 *
 * - SQLite: one process owns the database, so signals stay in the process.
 * - PostgreSQL: each instance LISTENs on one channel over a dedicated connection (outside Prisma's pool, which
 *   cannot hold a session open) and sends a NOTIFY after each commit, so instances wake each other. NOTIFY is
 *   sent after the commit, from the same connection; an instance that dies in between only costs the others
 *   one poll interval.
 *
 * The listener is written against `pg` directly rather than with `pg-listen` (issue 12 asked): pg-listen sends
 * one `NOTIFY` statement per call, where a burst of commits here is flushed as one `pg_notify` over an array,
 * and its notification event carries the payload but not the sending backend's process id, which is how an
 * instance skips its own notifications (its subscriptions were already woken in-process). Reconnecting with
 * backoff and reading the log at once afterwards are the only other duties, about 60 lines below.
 */

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

/** The organizations of a committed batch of events, each once. */
export function organizationsOf(events: readonly LifecycleEvent[]): string[] {
  return [...new Set(events.map((event) => event.organizationId))];
}

class InProcessCommitSignals implements CommitSignals {
  private readonly listeners = new Set<CommitSignalListener>();

  constructor(protected readonly log: NotifierLog) {}

  publish(events: readonly LifecycleEvent[]): void {
    for (const organizationId of organizationsOf(events)) this.emit(organizationId);
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
  private client: pg.Client | undefined;
  private connected = false;
  private closed = false;
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private reconnectDelayMs = 100;
  /** Organizations waiting to be signalled, merged until the next turn of the event loop. */
  private readonly outgoing = new Set<string>();
  private flushScheduled = false;
  private sending: Promise<void> = Promise.resolve();

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

  override publish(events: readonly LifecycleEvent[]): void {
    for (const organizationId of organizationsOf(events)) {
      // This instance's own subscriptions are woken at once; the others through NOTIFY.
      this.emit(organizationId);
      this.outgoing.add(organizationId);
    }
    if (!this.flushScheduled && this.outgoing.size > 0) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  override async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    await super.close();
    await this.sending;
    const client = this.client;
    this.client = undefined;
    if (client) await client.end().catch(() => undefined);
  }

  private flush(): void {
    this.flushScheduled = false;
    const payloads = [...this.outgoing];
    this.outgoing.clear();
    const client = this.client;
    // Disconnected: the other instances find these events at their next poll.
    if (!client || !this.connected || this.closed) return;
    // One statement per flush, one flush at a time on this connection (pg queues queries, but deprecates it).
    this.sending = this.sending
      .then(() =>
        client.query("SELECT pg_notify($1, payload) FROM unnest($2::text[]) AS payload", [LIFECYCLE_CHANNEL, payloads]),
      )
      .then(
        () => undefined,
        (error: unknown) => this.log.warn({ err: error }, "sending lifecycle commit notifications failed"),
      );
  }

  private async connect(): Promise<void> {
    if (this.closed) return;
    const client = new pg.Client({ connectionString: this.url, application_name: "reftrail-lifecycle-signals" });
    this.client = client;
    client.on("notification", (message) => {
      // Our own NOTIFY comes back to us too; local subscribers were already woken by publish().
      if (message.processId === backendProcessId(client) || message.channel !== LIFECYCLE_CHANNEL || !message.payload)
        return;
      // The payload is an organization id.
      this.emit(message.payload);
    });
    client.on("error", (error) => this.lost(client, error));
    client.on("end", () => this.lost(client, undefined));
    try {
      await client.connect();
      await client.query(`LISTEN ${LIFECYCLE_CHANNEL}`);
      this.connected = true;
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
    this.connected = false;
    this.client = undefined;
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

/** The server process behind a connection (set once connected; `pg` has it, its type declarations do not). */
function backendProcessId(client: pg.Client): number | undefined {
  return (client as pg.Client & { processID?: number }).processID;
}
