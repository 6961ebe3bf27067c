/*
 * The live order of the lifecycle log (docs/decisions.md, "Subscriptions"). Glossary for the live runtime
 * (src/live/) and its ports (live-feed-ports.ts here):
 *
 * - log position: an event's place in the live order, `(commit, sequence)`, both assigned by the database, in
 *   the order in which the events' transactions commit. On SQLite `commit` is always 0 and `sequence` is taken
 *   inside the writing transaction, under SQLite's single write lock. On PostgreSQL `commit` is the number its
 *   transaction took at COMMIT under a lock held until the commit is visible (migration 0006), and `sequence`
 *   orders the events inside that transaction. Either way, numbers become visible in increasing order: a reader
 *   that has seen every event up to a position will never see a new one there.
 * - frontier: the position up to which the feed has read the log and handed out every event it found.
 *
 * The live order is the order of commits, not the `(occurred_at, id)` order of `Reference.events`: the two
 * differ only among events whose transactions ran at the same time.
 */

/** A place in the live order. Compared by `commit`, then `sequence`. */
export interface LogPosition {
  readonly commit: bigint;
  readonly sequence: bigint;
}

/** Before every event. */
export const LOG_START: LogPosition = { commit: 0n, sequence: 0n };

export function comparePositions(a: LogPosition, b: LogPosition): number {
  if (a.commit !== b.commit) return a.commit < b.commit ? -1 : 1;
  if (a.sequence !== b.sequence) return a.sequence < b.sequence ? -1 : 1;
  return 0;
}

export function laterOf(a: LogPosition, b: LogPosition): LogPosition {
  return comparePositions(a, b) >= 0 ? a : b;
}

/** `"<commit>.<sequence>"`: how positions travel in cursors (JSON has no 64-bit integers). */
export function formatPosition(position: LogPosition): string {
  return `${position.commit}.${position.sequence}`;
}

/** The inverse of {@link formatPosition}; null for anything else. */
export function parsePosition(text: unknown): LogPosition | null {
  if (typeof text !== "string") return null;
  const match = /^(\d{1,19})\.(\d{1,19})$/.exec(text);
  if (!match) return null;
  return { commit: BigInt(match[1]!), sequence: BigInt(match[2]!) };
}
