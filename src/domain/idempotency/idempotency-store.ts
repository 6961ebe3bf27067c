/*
 * The port behind `Idempotency-Key` (SPEC §6): remembered first responses, keyed by organization and key.
 * Implemented in src/store/sql/idempotency-repository.ts; the REST adapter (src/rest/idempotency.ts) decides what a key
 * means for a request.
 */

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
}
