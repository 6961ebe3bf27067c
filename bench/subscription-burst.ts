import type { Services } from "../src/domain/services.ts";

/* The burst of subscriptions.bench.ts, shared by the instance in the bench's process and the one in a child. */

const epochNow = () => performance.timeOrigin + performance.now();

/** Runs `work` over `items`, `concurrency` at a time. */
export async function inParallel<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) await work(items[next++]!);
    }),
  );
}

/**
 * Records one extraction per entry of `referenceIds`, `writers` at a time, and returns when each event's
 * transaction committed: from the unit of work's after-commit listeners (epoch milliseconds).
 */
export async function writeBurst(
  services: Services,
  organizationId: string,
  referenceIds: readonly string[],
  writers: number,
): Promise<Map<string, number>> {
  const committedAt = new Map<string, number>();
  const stopListening = services.commits.onEventsCommitted((events) => {
    const at = epochNow();
    for (const event of events) committedAt.set(event.id, at);
  });
  try {
    await inParallel(referenceIds, writers, async (referenceId) => {
      await services.referenceTracking.recordExtraction(organizationId, referenceId, { status: "succeeded" });
      // Requests arrive over the network, between turns of the event loop. Without this, on SQLite (whose driver
      // is synchronous) the writers' promise chains would never yield, and no timer could fire during the burst.
      await new Promise((resolve) => setImmediate(resolve));
    });
  } finally {
    stopListening();
  }
  return committedAt;
}
