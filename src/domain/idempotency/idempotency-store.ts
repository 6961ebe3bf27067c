/*
 * The port behind `Idempotency-Key`: remembered first responses, keyed by organization and key.
 * Implemented in src/store/sql/idempotency-repository.ts; the REST adapter (src/rest/idempotency.ts) decides what a key
 * means for a request.
 */

/** How long a key replays its first response; its record is pruned after that (the retention job, `reftrail prune`). */
export const IDEMPOTENCY_REPLAY_WINDOW_MS = 24 * 60 * 60 * 1000;

/** A claimed key: in flight while `statusCode` is null, else the first response to replay. */
export interface IdempotencyRecord {
  readonly organizationId: string;
  readonly key: string;
  readonly requestHash: string;
  readonly statusCode: number | null;
  readonly responseBody: string | null;
  readonly createdAt: Date;
}

export interface IdempotencyStore {
  find(organizationId: string, key: string): Promise<IdempotencyRecord | null>;
  /** Inserts an in-flight record; false when the key is already held (a unique key decides, also concurrently). */
  claim(organizationId: string, key: string, requestHash: string): Promise<boolean>;
  complete(organizationId: string, key: string, statusCode: number, responseBody: string): Promise<void>;
  release(organizationId: string, key: string): Promise<void>;
  /** Deletes records created before `cutoff`, at most `batchSize` of them; returns how many. */
  deleteCreatedBefore(cutoff: Date, batchSize: number): Promise<number>;
}

/**
 * Deletes the records whose window has passed, in batches of `batchSize` (each its own short statement), at most
 * `maxBatches` of them; returns how many. Instances may run it concurrently: deletes are idempotent.
 */
export async function pruneExpiredIdempotencyRecords(
  store: IdempotencyStore,
  now: Date,
  batchSize: number,
  maxBatches = Number.POSITIVE_INFINITY,
): Promise<number> {
  const cutoff = new Date(now.getTime() - IDEMPOTENCY_REPLAY_WINDOW_MS);
  let total = 0;
  for (let batch = 0; batch < maxBatches; batch++) {
    const deleted = await store.deleteCreatedBefore(cutoff, batchSize);
    total += deleted;
    if (deleted < batchSize) break;
  }
  return total;
}
