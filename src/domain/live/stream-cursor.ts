import { isEventPosition, type EventPosition } from "../lifecycle/lifecycle-log-service.ts";
import type { CursorCodec } from "../shared/cursor.ts";
import { isUuid } from "../shared/ids.ts";
import type { LiveEvent, LiveLogStore } from "./live-feed-ports.ts";
import { formatPosition, LOG_START, parsePosition, type LogPosition } from "./log-position.ts";

/*
 * Cursors of the log in live order, one format for every reader of it: a live subscription's messages
 * (`Subscription.lifecycleEvents`), the feed to poll (`GET /v1/events`, `Query.lifecycleEvents`). A cursor holds a
 * live position (`p`), valid whatever the filters, on any instance; after an event it also names the event
 * (`t`, `i`: its listing position), and the feed's "up to here" cursors (the end of the log as a read saw it)
 * hold the position alone. Any such cursor resumes any of these readers; a listing cursor (`Reference.events`,
 * REST `next_cursor` of a reference's events) is accepted too, resolved by its event.
 */

/**
 * `p`: a live position; `t`, `i`: the event's listing position. Cursors issued before commit-ordered positions
 * (migration 0006) carried `l`, a position in the former order, and no `p`: they are resolved by their event.
 */
type StreamCursor = Partial<EventPosition> & { readonly p?: string };

// Stream cursors hold a position in the organization's log, valid whatever the reader's filters.
const STREAM_CURSOR_SCOPE = { scope: "lifecycle-stream" };

function isStreamCursor(value: unknown): value is StreamCursor {
  if (isEventPosition(value)) return true;
  if (typeof value !== "object" || value === null) return false;
  const cursor = value as StreamCursor;
  return parsePosition(cursor.p) !== null && cursor.t === undefined && cursor.i === undefined;
}

export class StreamCursors {
  constructor(
    private readonly cursors: CursorCodec,
    private readonly store: Pick<LiveLogStore, "findPosition">,
  ) {}

  /** The cursor just after `live`. */
  after(live: LiveEvent): string {
    return this.cursors.encode<StreamCursor>(
      { t: live.event.occurredAt.toISOString(), i: live.event.id, p: formatPosition(live.position) },
      STREAM_CURSOR_SCOPE,
    );
  }

  /** The cursor at a position that is no event's: the end of the log as a read saw it. */
  at(position: LogPosition): string {
    return this.cursors.encode<StreamCursor>({ p: formatPosition(position) }, STREAM_CURSOR_SCOPE);
  }

  /**
   * Where a reader given `cursor` starts (exclusive). A listing cursor names an event: the reader continues after
   * that event's live position; an event gone past retention (or of another organization) starts the reader at
   * the start of the log, which then holds only what retention keeps.
   * @throws INVALID_CURSOR (malformed, altered, or not a lifecycle event cursor), at `parameter`.
   */
  async startAfter(organizationId: string, cursor: string, parameter: string): Promise<LogPosition> {
    // Any event cursor names an event of the log, whichever listing (and filters) it came from.
    const decoded = this.cursors.decodeIgnoringFilters(cursor, isStreamCursor, parameter);
    const live = parsePosition(decoded.p);
    if (live) return live;
    const eventId = decoded.i?.toLowerCase();
    if (eventId === undefined || !isUuid(eventId)) return LOG_START;
    return (await this.store.findPosition(organizationId, eventId)) ?? LOG_START;
  }
}
