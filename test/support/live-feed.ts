import type { CommitSignals } from "../../src/domain/live/live-feed-ports.ts";
import type { LiveFeedLog } from "../../src/live/live-feed.ts";

/** Commit signals that never fire: a feed built on them finds every event by polling. */
export const silentSignals: CommitSignals = {
  publish: () => undefined,
  crossProcess: false,
  onSignal: () => () => undefined,
  close: async () => undefined,
};

/** A feed's log that keeps nothing. */
export const quietLog: LiveFeedLog = { error: () => undefined };
