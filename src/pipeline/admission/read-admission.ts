/*
 * Reads are admitted a few per event-loop turn; writes are never held.
 *
 * One Node process serves every connection. Under a saturating read load (50 keep-alive connections, each sending
 * its next request the moment the last one is answered) a turn of the event loop runs every request that arrived
 * during the previous one. On SQLite a read runs to its end inside that turn (better-sqlite3 is synchronous), so a
 * turn is as long as 50 reads, and a write, or a new connection, arriving meanwhile waits for all of them; on
 * PostgreSQL the reads fill the connection pool and a write's transaction queues behind every statement sent
 * before it. Both made the write feed's tail seconds long while the reads ran (docs/benchmarks.md).
 *
 * So a read asks for admission first. A turn admits a share of the waiting reads and at most `maxReadsInFlight`
 * run at once; the rest wait in arrival order, and each turn's check phase admits the next share. Whatever else is
 * ready (writes, new connections, timers, database answers) runs between those shares instead of behind all of
 * them. Hand-written because the queueing libraries (p-limit, p-queue) bound concurrency, not work per
 * event-loop turn, which is what a synchronous driver needs bounded.
 *
 * The share adapts to how long turns last (`turnTargetMs`): one more read per turn after a turn shorter than the
 * target, half as many after a longer one, between the 4 that used to be fixed and `readsPerTurn`. The fixed
 * share of 4 had been chosen on a machine loaded 8–12 times over, where 4 reads made a turn of several
 * milliseconds; on a quiet machine they make a turn of 1–1.5 ms, and serving the same reads in that many more
 * turns cost them a quarter of their throughput. Aiming at a turn's length keeps what the share was for (a write,
 * an accept or a database answer waits about one turn, never behind every read) on either machine
 * (docs/decisions.md, "Read admission").
 *
 * New connections are accepted one per turn: libuv takes a single connection from the listening socket's queue
 * each time the loop polls it (since libuv 1.45, for fairness between processes sharing a port). Under load a turn
 * lasts milliseconds, so 50 clients connecting at once were accepted over a second or more, and a client that
 * connected just after them (a write feed opening a connection) waited behind all of them, its request not even
 * read: measured on PostgreSQL, a new connection's first answer took 0.9–1.5 s while a read load started. So a
 * turn that accepted a connection, which means more may be queued, is followed by a turn that admits a single
 * read: turns stay short while connections are arriving, and the queue drains in a few milliseconds per
 * connection. Once a turn accepts none, `readsPerTurn` applies again.
 *
 * Waiting reads queue per organization, and the places that free up go to the organizations in turn, one read
 * each, each organization's reads in arrival order. In one queue, an organization that sent a hundred slow reads
 * (a flood of feed scans) had every other organization's next read wait behind all of them; now the next place
 * goes to the next organization with a read waiting, so a quiet one waits for about one read, whatever another
 * queued (issue 49.3). Nothing is held back while places are free: one busy organization alone still gets every
 * place.
 */

export interface ReadAdmissionLimits {
  /** Reads admitted in one event-loop turn, at most: the share a turn admits adapts below it. */
  readonly readsPerTurn: number;
  /** Reads admitted and not yet answered, at most. */
  readonly maxReadsInFlight: number;
  /**
   * The length, in milliseconds, that turns serving waiting reads aim at: the share grows by one read after a
   * shorter turn and halves after a longer one. 0: every turn admits `readsPerTurn`.
   */
  readonly turnTargetMs: number;
  /** Milliseconds from any fixed point (tests pass their own). */
  readonly now?: () => number;
}

/** Called once the read may run; the read calls `done` when it has been answered (or abandoned). */
export type Admitted = (done: () => void) => void;

/** One organization's waiting reads, first in first out. */
class PartyQueue {
  private readonly reads: Admitted[] = [];
  private head = 0;

  get size(): number {
    return this.reads.length - this.head;
  }

  push(read: Admitted): void {
    this.reads.push(read);
  }

  shift(): Admitted {
    const read = this.reads[this.head]!;
    this.reads[this.head++] = undefined as unknown as Admitted;
    if (this.head > 1024 && this.head * 2 > this.reads.length) {
      this.reads.splice(0, this.head);
      this.head = 0;
    }
    return read;
  }
}

export class ReadAdmission {
  /** Waiting reads by organization (`party`), and the organizations with reads waiting in the order they are served. */
  private readonly queues = new Map<string, PartyQueue>();
  private readonly rotation: string[] = [];
  /** The next organization of `rotation` to serve. */
  private nextParty = 0;
  private waitingCount = 0;
  private inFlight = 0;
  private admittedThisTurn = 0;
  /** Reads a turn admits while its length is on target, from MIN_SHARE to `readsPerTurn` (see the top). */
  private share: number;
  /** Reads the current turn may admit: the share, or one after a turn that accepted a connection. */
  private turnLimit: number;
  private connectionsThisTurn = 0;
  private turnEndScheduled = false;
  /** When the last turn's check phase ran, and whether the loop has been busy since (see endTurn). */
  private lastTurnEndedAt = 0;
  private busySinceLastTurnEnd = false;
  private readonly now: () => number;

  constructor(private readonly limits: ReadAdmissionLimits) {
    if (!(limits.readsPerTurn >= 1) || !(limits.maxReadsInFlight >= 1)) {
      throw new RangeError("read admission limits must be at least 1");
    }
    if (!(limits.turnTargetMs >= 0)) throw new RangeError("the turn's target length must not be negative");
    this.now = limits.now ?? (() => performance.now());
    // The fixed share of before to begin with: a server starting under load grows its share within a few dozen
    // turns.
    this.share = limits.turnTargetMs > 0 ? Math.min(limits.readsPerTurn, MIN_SHARE) : limits.readsPerTurn;
    this.turnLimit = this.share;
  }

  /** Reads a turn admits now, below `readsPerTurn`. */
  get turnShare(): number {
    return this.share;
  }

  /** Told of every connection the server accepts: the next turn admits a single read (see above). */
  connectionAccepted(): void {
    this.connectionsThisTurn += 1;
    this.scheduleTurnEnd();
  }

  /** Reads waiting for admission. */
  get queued(): number {
    return this.waitingCount;
  }

  /** Reads admitted and not yet done. */
  get running(): number {
    return this.inFlight;
  }

  /**
   * Runs `admitted` now when this turn still has room and nothing waits, else later: after the reads `party` (the
   * organization) sent before it, in turn with the other organizations' (see the top). Every admitted read must call
   * its `done` exactly once (further calls are ignored).
   */
  admit(admitted: Admitted, party = ""): void {
    if (this.waitingCount === 0 && this.hasRoom()) {
      this.start(admitted);
      return;
    }
    let queue = this.queues.get(party);
    if (!queue) {
      queue = new PartyQueue();
      this.queues.set(party, queue);
      this.rotation.push(party);
    }
    queue.push(admitted);
    this.waitingCount += 1;
    this.scheduleTurnEnd();
  }

  /** The next waiting read: the oldest of the next organization in turn. */
  private takeNext(): Admitted {
    if (this.nextParty >= this.rotation.length) this.nextParty = 0;
    const party = this.rotation[this.nextParty]!;
    const queue = this.queues.get(party)!;
    const read = queue.shift();
    this.waitingCount -= 1;
    if (queue.size === 0) {
      this.queues.delete(party);
      this.rotation.splice(this.nextParty, 1);
    } else {
      this.nextParty += 1;
    }
    return read;
  }

  private hasRoom(): boolean {
    return this.admittedThisTurn < this.turnLimit && this.inFlight < this.limits.maxReadsInFlight;
  }

  private start(admitted: Admitted): void {
    this.inFlight += 1;
    this.admittedThisTurn += 1;
    this.scheduleTurnEnd();
    let finished = false;
    admitted(() => {
      if (finished) return;
      finished = true;
      this.inFlight -= 1;
      // A read that ended frees a place: waiting reads take it at the end of this turn, not inside it.
      if (this.queued > 0) this.scheduleTurnEnd();
    });
  }

  /**
   * setImmediate runs in the check phase, after the turn's I/O: the turn's count starts over there, and the next
   * waiting reads are admitted for this turn's end. Reads admitted there run in their own callbacks' microtasks,
   * so one turn never holds more than about twice `readsPerTurn` reads.
   */
  private scheduleTurnEnd(): void {
    if (this.turnEndScheduled) return;
    this.turnEndScheduled = true;
    setImmediate(() => this.endTurn());
  }

  private endTurn(): void {
    this.turnEndScheduled = false;
    this.adaptShare();
    this.admittedThisTurn = 0;
    this.turnLimit = this.connectionsThisTurn > 0 ? 1 : this.share;
    this.connectionsThisTurn = 0;
    let admitted = 0;
    while (this.waitingCount > 0 && this.hasRoom()) {
      this.start(this.takeNext());
      admitted += 1;
    }
    // Reads admitted or left waiting keep an immediate pending (start() and done() schedule the next end), and
    // libuv does not block for I/O while one is: the time to the next check phase is then the next turn's work.
    // Otherwise the loop may wait for I/O meanwhile, and that wait is no turn's length.
    this.busySinceLastTurnEnd = admitted > 0 || this.queued > 0;
    // start() scheduled the next turn's end when it admitted anything; a queue blocked by reads in flight
    // waits for one of them to finish (its done() schedules it).
  }

  /** One read more after a turn shorter than the target, half as many after a longer one (see the top). */
  private adaptShare(): void {
    const now = this.now();
    const target = this.limits.turnTargetMs;
    if (target > 0 && this.busySinceLastTurnEnd) {
      this.share =
        now - this.lastTurnEndedAt > target
          ? Math.max(Math.min(MIN_SHARE, this.limits.readsPerTurn), Math.floor(this.share / 2))
          : Math.min(this.limits.readsPerTurn, this.share + 1);
    }
    this.lastTurnEndedAt = now;
  }
}

/**
 * The share a server starts with, and the least it falls to: the fixed share of before, measured on a machine
 * loaded 8–12 times over. Long turns never make admission stricter than it was there.
 */
const MIN_SHARE = 4;
