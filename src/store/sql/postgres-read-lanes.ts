import pg from "pg";
import { isDatabaseUnavailableError } from "../database-availability.ts";
import { SESSION_SETTINGS } from "./postgres-session.ts";
import type { PostgresStatementNames } from "./postgres-statement-names.ts";

/*
 * PostgreSQL reads outside units of work go down a few long-lived, pipelined connections ("lanes") instead of
 * taking a pooled connection each, and every lane sends what it was given during one event-loop turn in one
 * write.
 *
 * Why: a pooled read costs a socket write, a wake-up of its backend and a socket read of its own. On the 2-core
 * machines measured (docs/benchmarks.md) that was the largest single cost of a GraphQL reference request on
 * PostgreSQL: the statements' writes alone were 16 % of the server's thread, and a statement cost the client
 * ~100 µs of CPU when ten ran at once on ten connections, against ~30 µs when fifty went pipelined down two
 * connections in one write each. A turn of a loaded server sends a handful of statements, so lanes batch them.
 *
 * How: node-postgres's pipeline mode sends a statement without waiting for the answers before it (each still
 * has its own Sync, so one statement's error touches no other). A lane's socket is corked when the turn gives it
 * its first statement and uncorked in the turn's check phase (setImmediate), after every I/O callback of the
 * turn has run. A statement goes to the lane with the fewest unanswered.
 *
 * Only plain reads go down lanes: PostgreSQL answers a lane's statements one after another, so a statement
 * that could wait (a write waiting for a row lock) would hold up every read behind it. A SELECT without a
 * row-locking clause (FOR UPDATE, FOR SHARE...) waits for no row lock; postgres-executor.ts sends nothing else
 * here. Units of work keep their own pooled connections.
 *
 * A lane whose connection fails (the server restarts, pg_terminate_backend) is replaced by a new connection on
 * its next statement, and the statements that were in flight on it are sent again, down another lane
 * (see `query`); its "error" event is always listened to, so a killed connection never ends the process.
 *
 * Hand-written because node-postgres's pool lends a connection to one borrower at a time, which is the cost
 * being removed, and no maintained library multiplexes node-postgres statements over shared connections.
 */

/** A statement's error when its lane's connection was lost with it: the statement may be sent again. */
class LostLaneError extends Error {
  constructor(readonly lost: unknown) {
    super("the read connection was lost");
  }
}

/** One pipelined connection and the statements sent on it and not yet answered. */
interface Lane {
  client: pg.Client;
  /** Connected: statements sent before are queued by the client itself and sent once it is. */
  connected: boolean;
  /** Failed or ended: replaced by a new lane before the next statement. */
  broken: boolean;
  unanswered: number;
  corked: boolean;
}

export class PostgresReadLanes {
  private readonly lanes: Lane[] = [];
  private readonly corkedLanes: Lane[] = [];
  private uncorkScheduled = false;
  private closed = false;

  constructor(
    private readonly url: string,
    private readonly laneCount: number,
    /** Names each statement for the lane it goes down (statements are prepared per connection). */
    private readonly names: PostgresStatementNames,
  ) {
    if (!(laneCount >= 1)) throw new RangeError("at least one read connection is needed");
  }

  /**
   * Sends `config` down the least busy lane and returns its result. A statement lost with its lane's connection
   * is sent again, down another lane: under load a lane carries dozens of statements, where a pooled connection
   * would have lost one, and a plain read is safe to run twice (it may have run before the connection went, and
   * it changes nothing). When the new connection cannot be made either, the error is the caller's (503 upstream).
   */
  async query(config: pg.QueryConfig): Promise<pg.QueryResult> {
    // The other lanes may have been lost at the same moment without it being noticed yet (their sockets' ends
    // come in later events): one attempt more than there are lanes always reaches a new connection.
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.queryOnce(config);
      } catch (error) {
        if (!(error instanceof LostLaneError)) throw error;
        if (this.closed || attempt === this.laneCount) throw error.lost;
      }
    }
  }

  private async queryOnce(config: pg.QueryConfig): Promise<pg.QueryResult> {
    if (this.closed) throw new Error("the PostgreSQL read connections are closed");
    const lane = this.leastBusyLane();
    lane.unanswered++;
    if (lane.connected && !lane.corked) this.cork(lane);
    try {
      return await lane.client.query(this.names.on(lane.client, config));
    } catch (error) {
      // The client rejects its statements before it emits "error" or "end" (which mark the lane broken), but
      // does both in one go, before any of those rejections is seen here. The statement the server was running
      // when it ended the connection fails with the server's own error (57P01, say), before the socket closes.
      if (lane.broken || isDatabaseUnavailableError(error)) {
        lane.broken = true;
        throw new LostLaneError(error);
      }
      throw error;
    } finally {
      lane.unanswered--;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const lanes = this.lanes.splice(0);
    this.uncorkAll();
    await Promise.all(lanes.map((lane) => lane.client.end().catch(() => {})));
  }

  private leastBusyLane(): Lane {
    for (let i = 0; i < this.lanes.length; i++) {
      if (this.lanes[i]!.broken) this.lanes[i] = this.openLane();
    }
    if (this.lanes.length < this.laneCount) {
      // A new lane only when every open one is busy: an idle server keeps one connection.
      const idle = this.lanes.find((lane) => lane.unanswered === 0);
      if (idle) return idle;
      const lane = this.openLane();
      this.lanes.push(lane);
      return lane;
    }
    let best = this.lanes[0]!;
    for (const lane of this.lanes) if (lane.unanswered < best.unanswered) best = lane;
    return best;
  }

  private openLane(): Lane {
    const client = new pg.Client({ connectionString: this.url, pipeline: true });
    const lane: Lane = { client, connected: false, broken: false, unanswered: 0, corked: false };
    const breakLane = () => {
      lane.broken = true;
    };
    // Without a listener an "error" event ends the process; the statements in flight reject on their own.
    client.on("error", breakLane);
    client.on("end", breakLane);
    client.connect().then(() => {
      lane.connected = true;
    }, breakLane);
    // Queued before any read the lane will carry.
    client.query(SESSION_SETTINGS).catch(breakLane);
    return lane;
  }

  private cork(lane: Lane): void {
    lane.client.connection.stream.cork();
    lane.corked = true;
    this.corkedLanes.push(lane);
    if (!this.uncorkScheduled) {
      this.uncorkScheduled = true;
      setImmediate(() => this.uncorkAll());
    }
  }

  private uncorkAll(): void {
    this.uncorkScheduled = false;
    for (const lane of this.corkedLanes.splice(0)) {
      lane.corked = false;
      lane.client.connection.stream.uncork();
    }
  }
}
