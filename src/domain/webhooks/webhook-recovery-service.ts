import type { LifecycleEvent } from "../lifecycle/lifecycle-event.ts";
import type { Clock } from "../shared/clock.ts";
import { DomainError, notFound } from "../shared/errors.ts";
import { isUuid, newId } from "../shared/ids.ts";
import type { Store } from "../store.ts";
import { windowOf, type RecoveryWindowInput } from "./recovery-window.ts";
import { buildEventBody } from "./webhook-body.ts";
import type { WebhookDelivery, WebhookEndpoint } from "./webhook-models.ts";
import type {
  HeldBackSummary,
  LogPosition,
  ReplayJob,
  ReplayLease,
  ReplaySelection,
} from "./webhook-recovery-repository.ts";

export type { RecoveryWindowInput } from "./recovery-window.ts";

export interface RecoveryOptions {
  /** Events read and scheduled per replay batch (one short transaction each). */
  readonly replayBatchSize: number;
  /** How often a replay looks whether its previous batch has mostly gone out. */
  readonly replayPollMs: number;
  /** How long an instance holds a replay without renewing it; after that any instance resumes it. */
  readonly replayLeaseMs: number;
}

/** The most deliveries one recover or replay call may send (422 beyond, saying how many matched). */
export const MAX_DELIVERIES_PER_CALL = 100_000;

/** Events a replay schedules per transaction (a batch is written as several). */
const REPLAY_WRITE_CHUNK = 200;

const DEFAULT_OPTIONS: RecoveryOptions = { replayBatchSize: 1_000, replayPollMs: 20, replayLeaseMs: 30_000 };

/** How often an instance looks for replays to resume (another instance's that stopped, or died), at most. */
const RESUME_EVERY_MS = 5_000;

/** The replay's row is gone or held by another instance: this one stops scheduling it. */
class ReplayLeaseLost extends Error {}

/**
 * Recovery and replay of an endpoint's deliveries over a time window `[since, until)` (docs/decisions.md,
 * "Webhook recovery and replay"), and the summary of what an ordered endpoint holds back.
 *
 * - recover: the endpoint's deliveries created in the window whose last attempt failed or that were given up are
 *   due again now, with their webhook-id and body; on an ordered endpoint each goes out before the later pending
 *   deliveries of its reference, which wait behind it. The count and the scheduling are one transaction.
 * - replay: every event of the log in the window that the endpoint's filters match today is sent again, oldest
 *   first: under the webhook-id of the endpoint's existing delivery of the event if there is one, else as a new
 *   delivery whose body carries the event's tag snapshot. The count is the database's at the call; then a
 *   background task reads the window by keyset in batches and schedules each batch in its own short transaction
 *   once most of the previous one has gone out, so a large window is never in memory nor in the queue at once,
 *   and the other endpoints' deliveries keep their place in the claims. The window left (cursor and count) is a
 *   row of "webhook_replays", moved in each chunk's transaction and leased by the instance scheduling it, so a
 *   replay whose instance stops is resumed by any instance (`start`); the row's key allows one per endpoint.
 */
export class WebhookRecoveryService {
  private readonly scheduledListeners = new Set<(endpointId: string) => void>();
  private readonly replays = new Set<Promise<void>>();
  /** The endpoints whose replay this instance is scheduling. */
  private readonly running = new Set<string>();
  /** This instance's name in `webhook_replays.lease_owner`. */
  private readonly owner = newId();
  private resumeTimer: NodeJS.Timeout | null = null;
  private resuming: Promise<void> | null = null;
  private stopped = false;
  private replayFailed: (error: unknown, endpointId: string | null) => void = () => undefined;
  private readonly options: RecoveryOptions;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    /** Events before this are past the log's retention. */
    private readonly retentionCutoff: () => Date,
    options: Partial<RecoveryOptions> = {},
  ) {
    this.options = { ...DEFAULT_OPTIONS, ...options };
  }

  /**
   * Re-sends the endpoint's failed or given-up deliveries created in the window; returns how many.
   * @throws NOT_FOUND, CONFLICT (endpoint disabled), VALIDATION_FAILED (window), LIMIT_EXCEEDED (> 100,000).
   */
  async recover(organizationId: string, endpointId: string, input: RecoveryWindowInput): Promise<number> {
    const endpoint = await this.sendableEndpoint(organizationId, endpointId);
    const window = windowOf(input, this.clock.now(), this.retentionCutoff());
    const now = this.clock.now();
    if (input.dryRun) return this.store.webhookRecovery.countRecoverable(endpoint.id, window, now);
    const count = await this.store.transaction(async (store) => {
      refuseAboveLimit(await store.webhookRecovery.countRecoverable(endpoint.id, window, now));
      return store.webhookRecovery.recover(endpoint.id, window, now);
    });
    if (count > 0) this.notifyScheduled(endpoint.id);
    return count;
  }

  /**
   * Sends the endpoint every event of the window its filters match today; returns how many (scheduled in the
   * background, see the class comment).
   * @throws NOT_FOUND, CONFLICT (endpoint disabled, or a replay of it still being scheduled), VALIDATION_FAILED
   * (window), LIMIT_EXCEEDED (> 100,000).
   */
  async replay(organizationId: string, endpointId: string, input: RecoveryWindowInput): Promise<number> {
    const endpoint = await this.sendableEndpoint(organizationId, endpointId);
    const selection: ReplaySelection = {
      ...windowOf(input, this.clock.now(), this.retentionCutoff()),
      organizationId,
      eventTypes: endpoint.eventTypes,
      tagIds: endpoint.tagIds,
    };
    const count = await this.store.webhookRecovery.countReplayable(selection);
    if (input.dryRun) return count;
    refuseAboveLimit(count);
    if (count === 0) return count;
    const job: ReplayJob = {
      endpointId: endpoint.id,
      organizationId,
      since: selection.since,
      until: selection.until,
      remaining: count,
      after: null,
    };
    if (!(await this.store.webhookRecovery.startReplay(job, this.lease(), this.clock.now())))
      throw new DomainError(
        "CONFLICT",
        "A replay of this webhook endpoint is still being scheduled; replay again once it has been",
      );
    this.run(job, endpoint);
    return count;
  }

  /**
   * Resumes the replays no instance holds (their instance stopped, or died and its lease expired), now and then
   * every few seconds, until `stop`.
   */
  start(): void {
    if (this.resumeTimer || this.stopped) return;
    const every = Math.min(RESUME_EVERY_MS, this.options.replayLeaseMs / 2);
    this.resumeTimer = setInterval(() => this.resume(), every);
    this.resumeTimer.unref();
    this.resume();
  }

  private resume(): void {
    this.resuming ??= this.resumeReplays().finally(() => (this.resuming = null));
  }

  /** What an ordered endpoint holds back. @throws NOT_FOUND */
  async heldBack(organizationId: string, endpointId: string): Promise<HeldBackSummary> {
    const endpoint = await this.endpoint(organizationId, endpointId);
    return this.store.webhookRecovery.heldBack(endpoint.id);
  }

  /** Called after deliveries were made due by a recovery or a replay batch (wakes the worker). */
  onScheduled(listener: (endpointId: string) => void): () => void {
    this.scheduledListeners.add(listener);
    return () => this.scheduledListeners.delete(listener);
  }

  /**
   * Told when a background replay stops on an error (the caller logs it), or looking for replays to resume
   * failed (endpoint null). The replay's row stays leased to this instance until the lease expires; then any
   * instance resumes it from its last committed chunk.
   */
  onReplayFailed(listener: (error: unknown, endpointId: string | null) => void): void {
    this.replayFailed = listener;
  }

  /**
   * Stops scheduling replay batches (shutdown), waits for the batch being written, and hands the replays'
   * leases back: the next instance to look resumes them where they stopped.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.resumeTimer) clearInterval(this.resumeTimer);
    this.resumeTimer = null;
    await this.resuming;
    await Promise.allSettled([...this.replays]);
  }

  /** Resolves once every replay running now has scheduled its last batch (tests, benchmarks). */
  async settled(): Promise<void> {
    while (this.replays.size > 0) await Promise.allSettled([...this.replays]);
  }

  private async resumeReplays(): Promise<void> {
    try {
      while (!this.stopped) {
        const job = await this.store.webhookRecovery.claimReplay(this.lease(), this.clock.now());
        if (!job) return;
        this.run(job, null);
      }
    } catch (error) {
      this.replayFailed(error, null);
    }
  }

  private lease(): ReplayLease {
    return { owner: this.owner, expiresAt: new Date(this.clock.now().getTime() + this.options.replayLeaseMs) };
  }

  /** Schedules the job's remaining window in the background (`endpoint`: as read by the call, else read now). */
  private run(job: ReplayJob, endpoint: WebhookEndpoint | null): void {
    if (this.running.has(job.endpointId)) return;
    this.running.add(job.endpointId);
    const replay = this.runReplay(job, endpoint).finally(() => this.running.delete(job.endpointId));
    this.track(job.endpointId, replay);
  }

  private async runReplay(job: ReplayJob, known: WebhookEndpoint | null): Promise<void> {
    const recovery = this.store.webhookRecovery;
    const endpoint = known ?? (await this.store.webhooks.findEndpoint(job.organizationId, job.endpointId));
    // Resumed for an endpoint disabled meanwhile: nothing may be sent to it (enabling it again does not resume).
    if (!endpoint?.enabled) return recovery.endReplay(job.endpointId, this.owner);
    // The endpoint's filters as they are now, as at the call (they are read again when a replay is resumed).
    const selection: ReplaySelection = {
      since: job.since,
      until: job.until,
      organizationId: job.organizationId,
      eventTypes: endpoint.eventTypes,
      tagIds: endpoint.tagIds,
    };
    const progress = { after: job.after, remaining: job.remaining, renewedAt: this.clock.now().getTime() };
    let previous: string[] = [];
    try {
      // At most the counted events: an event committed into the window later, with an earlier time, may take the
      // place of the last one counted (see docs/decisions.md).
      while (progress.remaining > 0 && !this.stopped) {
        await this.waitUntilMostlySent(previous, job.endpointId, progress);
        if (this.stopped) break;
        const events = await recovery.replayableEvents(
          selection,
          progress.after,
          Math.min(this.options.replayBatchSize, progress.remaining),
        );
        // The window holds fewer events than counted (retention removed some): the replay is over.
        if (events.length === 0) return await recovery.endReplay(job.endpointId, this.owner);
        previous = await this.scheduleReplayBatch(endpoint, events, progress);
      }
      if (this.stopped && progress.remaining > 0) await recovery.releaseReplay(job.endpointId, this.owner);
    } catch (error) {
      // Another instance holds the replay now (this one stalled past its lease), or the endpoint was deleted.
      if (!(error instanceof ReplayLeaseLost)) throw error;
    }
  }

  /**
   * Schedules a batch in transactions of at most REPLAY_WRITE_CHUNK events, letting the event loop run between
   * them: on SQLite a transaction holds the one connection (and its synchronous statements the event loop) until
   * it commits, so a whole batch at once held live deliveries' claims and outcomes back for its length.
   */
  private async scheduleReplayBatch(
    endpoint: WebhookEndpoint,
    events: readonly LifecycleEvent[],
    progress: ReplayProgress,
  ): Promise<string[]> {
    const scheduled: string[] = [];
    for (let start = 0; start < events.length && !this.stopped; start += REPLAY_WRITE_CHUNK) {
      if (start > 0) await new Promise((resolve) => setImmediate(resolve));
      const chunk = events.slice(start, start + REPLAY_WRITE_CHUNK);
      scheduled.push(...(await this.scheduleReplayChunk(endpoint, chunk, progress)));
      this.notifyScheduled(endpoint.id);
    }
    return scheduled;
  }

  /**
   * One transaction: the events' existing deliveries due again, new deliveries for the others, and the replay's
   * row moved past them (or deleted with the last one), so a replay resumed elsewhere neither skips nor repeats
   * a chunk. Moves `progress` once committed.
   */
  private async scheduleReplayChunk(
    endpoint: WebhookEndpoint,
    events: readonly LifecycleEvent[],
    progress: ReplayProgress,
  ): Promise<string[]> {
    const ordered = endpoint.ordering === "reference";
    const last = events.at(-1)!;
    const after: LogPosition = { occurredAt: last.occurredAt, id: last.id };
    const remaining = progress.remaining - events.length;
    const lease = this.lease();
    const ids = await this.store.transaction(async (store) => {
      if (!(await store.webhookRecovery.advanceReplay(endpoint.id, after, remaining, lease)))
        throw new ReplayLeaseLost();
      const now = this.clock.now();
      const existing = await store.webhookRecovery.findDeliveryIdsOfEvents(
        endpoint.id,
        events.map((event) => event.id),
      );
      const reused = [...existing.values()];
      await store.webhookRecovery.requeueForReplay(reused, now, ordered);
      const fresh = events
        .filter((event) => !existing.has(event.id))
        .map((event): WebhookDelivery => ({
          id: newId(),
          organizationId: event.organizationId,
          endpointId: endpoint.id,
          eventId: event.id,
          eventType: event.type,
          body: buildEventBody(event),
          status: "pending",
          attemptCount: 0,
          attemptsSinceQueued: 0,
          nextAttemptAt: now,
          leaseOwner: null,
          leaseExpiresAt: null,
          createdAt: now,
          updatedAt: now,
          orderingKey: ordered ? event.referenceId : null,
          eventOccurredAt: event.occurredAt,
        }));
      await store.webhooks.insertDeliveries(fresh);
      return [...reused, ...fresh.map((delivery) => delivery.id)];
    });
    Object.assign(progress, { after, remaining, renewedAt: lease.expiresAt.getTime() - this.options.replayLeaseMs });
    return ids;
  }

  /**
   * Waits while more than half of the previous batch is still pending: the queue holds at most about one and a
   * half batches of a replay, whatever the window, and a receiver that is down slows the replay down instead of
   * piling its retries up.
   */
  private async waitUntilMostlySent(
    previous: readonly string[],
    endpointId: string,
    progress: ReplayProgress,
  ): Promise<void> {
    if (previous.length === 0) return;
    while (!this.stopped && (await this.store.webhookRecovery.countPending(previous)) * 2 > previous.length) {
      // A receiver that is slow or down may hold the replay here longer than its lease: renewed at a third of it.
      if (this.clock.now().getTime() - progress.renewedAt > this.options.replayLeaseMs / 3) {
        const lease = this.lease();
        if (!(await this.store.webhookRecovery.advanceReplay(endpointId, progress.after, progress.remaining, lease)))
          throw new ReplayLeaseLost();
        progress.renewedAt = lease.expiresAt.getTime() - this.options.replayLeaseMs;
      }
      await new Promise((resolve) => setTimeout(resolve, this.options.replayPollMs));
    }
  }

  private track(endpointId: string, replay: Promise<void>): void {
    const tracked = replay
      .catch((error: unknown) => this.replayFailed(error, endpointId))
      .finally(() => this.replays.delete(tracked));
    this.replays.add(tracked);
  }

  private notifyScheduled(endpointId: string): void {
    for (const listener of this.scheduledListeners) listener(endpointId);
  }

  private async endpoint(organizationId: string, id: string): Promise<WebhookEndpoint> {
    const endpoint = isUuid(id) ? await this.store.webhooks.findEndpoint(organizationId, id.toLowerCase()) : null;
    if (!endpoint) throw notFound("webhook endpoint");
    return endpoint;
  }

  private async sendableEndpoint(organizationId: string, id: string): Promise<WebhookEndpoint> {
    const endpoint = await this.endpoint(organizationId, id);
    if (!endpoint.enabled)
      throw new DomainError("CONFLICT", "The webhook endpoint is disabled; enable it to send to it");
    return endpoint;
  }
}

/** Where a running replay stands (mirrors its row once each chunk commits). */
interface ReplayProgress {
  after: LogPosition | null;
  remaining: number;
  /** When its lease was last renewed (epoch ms). */
  renewedAt: number;
}

function refuseAboveLimit(matched: number): void {
  if (matched <= MAX_DELIVERIES_PER_CALL) return;
  throw new DomainError(
    "LIMIT_EXCEEDED",
    `The window matches ${matched} deliveries; at most ${MAX_DELIVERIES_PER_CALL} are sent per call: narrow it`,
    [],
    { limit: MAX_DELIVERIES_PER_CALL, matched },
  );
}
