/*
 * The live order of the lifecycle log (docs/decisions.md, "Subscriptions"). Glossary for src/domain/live/:
 *
 * - log position: an event's place in the live order, `(transactionId, sequence)`, both assigned by the
 *   database when the event is inserted. On SQLite `transactionId` is always 0 and `sequence` is taken inside
 *   the writing transaction, under SQLite's single write lock: commit order. On PostgreSQL `transactionId` is the
 *   writing transaction's id and `sequence` a sequence number; positions are read only below the visibility
 *   horizon (the oldest transaction still running), so once a position has been read, no event can ever appear
 *   before it. Either way: a reader that has seen every event up to a position will never see a new one there.
 * - frontier: the position up to which the feed has read the log and handed out every event it found.
 * - horizon (PostgreSQL): the oldest transaction of this database still running. Committed events of
 *   transactions at or above it wait until every older transaction has finished.
 *
 * The live order is the order of commits (SQLite) or of transaction ids (PostgreSQL), not the
 * `(occurred_at, id)` order of `Reference.events`: the two differ only among events whose transactions ran at
 * the same time.
 */

/** A place in the live order. Compared by `transactionId`, then `sequence`. */
export interface LogPosition {
  readonly transactionId: bigint;
  readonly sequence: bigint;
}

/** Before every event. */
export const LOG_START: LogPosition = { transactionId: 0n, sequence: 0n };

export function comparePositions(a: LogPosition, b: LogPosition): number {
  if (a.transactionId !== b.transactionId) return a.transactionId < b.transactionId ? -1 : 1;
  if (a.sequence !== b.sequence) return a.sequence < b.sequence ? -1 : 1;
  return 0;
}

export function laterOf(a: LogPosition, b: LogPosition): LogPosition {
  return comparePositions(a, b) >= 0 ? a : b;
}

/** `"<transactionId>.<sequence>"`: how positions travel in cursors (JSON has no 64-bit integers). */
export function formatPosition(position: LogPosition): string {
  return `${position.transactionId}.${position.sequence}`;
}

/** The inverse of {@link formatPosition}; null for anything else. */
export function parsePosition(text: unknown): LogPosition | null {
  if (typeof text !== "string") return null;
  const match = /^(\d{1,19})\.(\d{1,19})$/.exec(text);
  if (!match) return null;
  return { transactionId: BigInt(match[1]!), sequence: BigInt(match[2]!) };
}
