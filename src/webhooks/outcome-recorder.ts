import type { FastifyBaseLogger } from "fastify";
import type { Clock } from "../domain/shared/clock.ts";
import { withoutReceiverText, type AttemptResult, type AttemptToRecord } from "../domain/webhooks/delivery-attempts.ts";
import type { WebhookDeliveryService } from "../domain/webhooks/webhook-delivery-service.ts";

/** Outcomes are recorded in batches of at most this many... */
const RECORD_BATCH_SIZE = 128;
/** ...gathered for at most this long (unless every request in flight has finished: then at once). */
const RECORD_BATCH_DELAY_MS = 5;
/**
 * Batches being written at once, at most. Each holds a connection of the pool the API shares: against a database
 * that stalls, a new batch every few milliseconds would take them all. Outcomes that arrive meanwhile go into the
 * next batch, written when one of these ends (so batches grow instead).
 */
const MAX_BATCHES_WRITING = 2;

/** An outcome whose write failed because the database was away is written again after this long... */
const RECORD_RETRY_DELAY_MS = 100;
/** ...as long as its lease outlasts that by this much (else the delivery may be claimed again meanwhile). */
const RECORD_RETRY_LEASE_MARGIN_MS = 100;

export interface OutcomeRecorderOptions {
  /**
   * Whether an error means the database is away for a moment (a connection killed, a restart): an outcome whose
   * write failed so is written again while its lease holds, instead of being lost and the request sent again.
   */
  readonly isDatabaseUnavailable: (error: unknown) => boolean;
  /** The worker's deliveries in flight, those whose outcome is on its way here included. */
  readonly inFlight: () => number;
}

interface PendingRecord {
  readonly item: AttemptToRecord;
  resolve(result: AttemptResult): void;
  reject(error: unknown): void;
}

/**
 * Records the delivery worker's outcomes (src/webhooks/webhook-worker.ts) in small batches (a few milliseconds'
 * worth): a success costs a share of one transaction instead of one of its own. One outcome never decides
 * another's:
 * - a batch whose write failed because the database was away is written again, a moment later, for the outcomes
 *   whose leases still hold;
 * - a batch refused for any other reason is written again one outcome at a time, so that the healthy outcomes
 *   are settled whatever the one that failed it;
 * - an outcome refused on its own is recorded without the receiver's text (its status and verdict stand), so
 *   that its delivery is settled too instead of sent again.
 * An outcome that still cannot be written is lost: its delivery is sent again once its lease expires, and that
 * lost attempt counts (src/domain/webhooks/lost-attempts.ts). Writing an outcome twice is harmless: a delivery
 * whose first write did commit no longer carries that claim's lease, and its attempt row is keyed by its id.
 */
export class OutcomeRecorder {
  private readonly toRecord: PendingRecord[] = [];
  private recording = 0;
  private batchesWriting = 0;
  private recordTimer: NodeJS.Timeout | null = null;
  /** Outcomes waiting to be written again (see `retryOrReject`). */
  private readonly toRetry = new Set<PendingRecord>();
  private retryTimer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly deliveries: WebhookDeliveryService,
    private readonly clock: Clock,
    private readonly log: FastifyBaseLogger,
    private readonly options: OutcomeRecorderOptions,
  ) {}

  /** Queues an outcome for the next batch; resolves once it is recorded. */
  record(item: AttemptToRecord): Promise<AttemptResult> {
    return new Promise<AttemptResult>((resolve, reject) => {
      this.toRecord.push({ item, resolve, reject });
      const stillSending = this.options.inFlight() - this.recording - this.toRecord.length - this.toRetry.size;
      if (this.toRecord.length >= RECORD_BATCH_SIZE || stillSending <= 0) this.flushRecords();
      else this.recordTimer ??= setTimeout(() => this.flushRecords(), RECORD_BATCH_DELAY_MS);
    });
  }

  /** Writes what waits to be written again at once, and retries no failed write from now on (shutdown). */
  stop(): void {
    this.stopped = true;
    this.flushRetries();
  }

  private flushRecords(): void {
    if (this.recordTimer) clearTimeout(this.recordTimer);
    this.recordTimer = null;
    if (this.batchesWriting >= MAX_BATCHES_WRITING) return;
    const batch = this.toRecord.splice(0);
    if (batch.length === 0) return;
    this.batchesWriting += 1;
    this.recording += batch.length;
    void this.write(batch).finally(() => {
      this.recording -= batch.length;
      this.batchesWriting -= 1;
      // What gathered while the writes were busy goes now.
      if (this.toRecord.length > 0) this.flushRecords();
    });
  }

  /** Writes a batch, falling back as the class comment says; settles every outcome of it. Never throws. */
  private async write(batch: readonly PendingRecord[]): Promise<void> {
    const failed = await this.tryWrite(batch, (pending) => pending.item);
    if (!failed) return;
    if (this.options.isDatabaseUnavailable(failed.error)) {
      this.retryOrReject(batch, failed.error);
      return;
    }
    if (batch.length > 1) {
      for (const pending of batch) await this.write([pending]);
      return;
    }
    const deliveryId = batch[0]!.item.claimed.delivery.id;
    this.log.warn({ err: failed.error, deliveryId }, "webhook outcome refused as received: recorded without its text");
    const again = await this.tryWrite(batch, (pending) => withoutReceiverText(pending.item));
    if (again) this.retryOrReject(batch, again.error);
  }

  /** Records the batch's outcomes and resolves them; on failure resolves nothing and says why. */
  private async tryWrite(
    batch: readonly PendingRecord[],
    itemOf: (pending: PendingRecord) => AttemptToRecord,
  ): Promise<{ error: unknown } | null> {
    try {
      const results = await this.deliveries.recordAttempts(batch.map(itemOf));
      batch.forEach((pending, index) => pending.resolve(results[index]!));
      return null;
    } catch (error) {
      return { error };
    }
  }

  /**
   * Outcomes whose write failed: when the database was away, those whose leases hold long enough are written
   * again in a moment (gathered with whatever else is waiting then); the others fail.
   */
  private retryOrReject(batch: readonly PendingRecord[], error: unknown): void {
    const retryable = !this.stopped && this.options.isDatabaseUnavailable(error);
    const retryBy = this.clock.now().getTime() + RECORD_RETRY_DELAY_MS + RECORD_RETRY_LEASE_MARGIN_MS;
    for (const pending of batch) {
      const leaseExpiresAt = pending.item.claimed.delivery.leaseExpiresAt?.getTime() ?? 0;
      if (retryable && leaseExpiresAt > retryBy) this.toRetry.add(pending);
      else pending.reject(error);
    }
    if (this.toRetry.size > 0) this.retryTimer ??= setTimeout(() => this.flushRetries(), RECORD_RETRY_DELAY_MS);
  }

  /** Moves the outcomes waiting to be written again into the next batch. */
  private flushRetries(): void {
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    if (this.toRetry.size === 0) return;
    this.toRecord.push(...this.toRetry);
    this.toRetry.clear();
    this.flushRecords();
  }
}
