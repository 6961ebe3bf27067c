import type { ClaimedDelivery } from "../domain/webhooks/delivery-attempts.ts";

/**
 * A delivery whose event occurred longer ago than this is backlog: a replay, a recovery, a re-send, a retry, a
 * queue that built up behind a receiver's outage.
 */
const BACKLOG_AGE_MS = 30_000;

/** Backlog requests on the wire at once, at most, while API reads wait to be served. */
const BACKLOG_WHILE_READS_WAIT = 2;

/**
 * Backlog yields to API reads (docs/decisions.md, "Backlog yields to reads"). Reads and the webhook worker share
 * one event loop: a replay of thousands of events, sent as fast as the process can, took it from the reads of
 * every organization (the soak: reads' p99 from 0.16 to 2.4 s while one endpoint replayed a minute of events).
 * So while reads wait for admission (src/pipeline/admission/), at most BACKLOG_WHILE_READS_WAIT backlog requests are on the
 * wire; live deliveries never wait for reads, and the backlog goes on at full speed once no read waits.
 */
export class ReadsFirst {
  /** Backlog deliveries on the wire. */
  private backlogSending = 0;

  constructor(
    /** Whether API reads are waiting to be served; absent: nothing is held. */
    private readonly readsWaiting: (() => boolean) | undefined,
  ) {}

  /** For one round of starts at `now`: whether the next delivery of an endpoint waits for the reads. */
  holdsForRound(now: number): (next: ClaimedDelivery) => boolean {
    let room = this.readsWaiting?.() ? BACKLOG_WHILE_READS_WAIT - this.backlogSending : Infinity;
    return (next) => isBacklog(next, now) && room-- <= 0;
  }

  /** A delivery's request begins; returns what to call once its answer is in (or it was given up). */
  started(claimed: ClaimedDelivery, now: number): () => void {
    if (!isBacklog(claimed, now)) return () => undefined;
    this.backlogSending++;
    return () => this.backlogSending--;
  }
}

function isBacklog(claimed: ClaimedDelivery, now: number): boolean {
  const occurredAt = claimed.delivery.eventOccurredAt;
  return occurredAt !== null && now - occurredAt.getTime() > BACKLOG_AGE_MS;
}
