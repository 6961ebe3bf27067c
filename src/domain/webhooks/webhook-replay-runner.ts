import type { LifecycleEvent } from "../lifecycle/lifecycle-event.ts";
import { runInBackground } from "../shared/background-work.ts";
import type { Clock } from "../shared/clock.ts";
import { newId } from "../shared/ids.ts";
import type { Store } from "../store.ts";
import { buildEventBody } from "./webhook-body.ts";
import type { WebhookDelivery, WebhookEndpoint } from "./webhook-models.ts";
import type { LogPosition, ReplayJob, ReplayLease, ReplaySelection } from "./webhook-recovery-repository.ts";

export interface RecoveryOptions {
  /** Events read and scheduled per replay batch (one short transaction each). */
  readonly replayBatchSize: number;
  /** How often a replay looks whether its previous batch has mostly gone out. */
  readonly replayPollMs: number;
  /** How long an instance holds a replay without renewing it; after that any instance resumes it. */
  readonly replayLeaseMs: number;
}

/** Events a replay schedules per transaction (a batch is written as several). */
const REPLAY_WRITE_CHUNK = 200;

const DEFAULT_OPTIONS: RecoveryOptions = { replayBatchSize: 1_000, replayPollMs: 20, replayLeaseMs: 30_000 };

/**
 * How often an instance looks for replays to resume (another instance's that stopped or died, or one whose endpoint
 * was enabled again), at most.
 */
const RESUME_EVERY_MS = 5_000;

/** The replay's row is gone or held by another instance: this one stops scheduling it. */
class ReplayLeaseLost extends Error {}

/**
 * The background side of replay (WebhookRecoveryService.replay starts it): each replay's window is scheduled batch
 * by batch, in chunks of one transaction each, under this instance's lease of its "webhook_replays" row; replays
 * that no instance holds are resumed here. Each chunk reads the endpoint as it is then (docs/decisions.md, "A
 * replay follows the endpoint").
 */
export class ReplayRunner {
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
    options: Partial<RecoveryOptions>,
    /** Told after a chunk's deliveries were made due (wakes the worker). */
    private readonly notifyScheduled: (endpointId: string) => void,
  ) {
    this.options = { ...DEFAULT_OPTIONS, ...options };
  }

  /**
   * Resumes the replays no instance holds (their instance stopped, or died and its lease expired, or their
   * endpoint was enabled again after a pause), now and then every few seconds, until `stop`.
   */
  start(): void {
    if (this.resumeTimer || this.stopped) return;
    const every = Math.min(RESUME_EVERY_MS, this.options.replayLeaseMs / 2);
    this.resumeTimer = setInterval(() => this.resume(), every);
    this.resumeTimer.unref();
    this.resume();
  }

  private resume(): void {
    this.resuming ??= runInBackground(() => this.resumeReplays()).finally(() => (this.resuming = null));
  }

  /** Told when a replay stops on an error, or looking for replays to resume failed (endpoint null). */
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
        this.run(job);
      }
    } catch (error) {
      this.replayFailed(error, null);
    }
  }

  lease(): ReplayLease {
    return { owner: this.owner, expiresAt: new Date(this.clock.now().getTime() + this.options.replayLeaseMs) };
  }

  /**
   * Schedules the job's remaining window in the background: a replay a request started outlives it, so its batches
   * are no part of the request (background-work.ts).
   */
  run(job: ReplayJob): void {
    if (this.running.has(job.endpointId)) return;
    this.running.add(job.endpointId);
    const replay = runInBackground(() => this.runReplay(job)).finally(() => this.running.delete(job.endpointId));
    this.track(job.endpointId, replay);
  }

  private async runReplay(job: ReplayJob): Promise<void> {
    const progress = { after: job.after, remaining: job.remaining, renewedAt: this.clock.now().getTime() };
    let previous: readonly string[] = [];
    // Where the batches that may still have deliveries pending began: where a pause puts the replay back.
    let pendingSince: ReplayPosition = { after: progress.after, remaining: progress.remaining };
    try {
      while (!this.stopped) {
        await this.waitUntilMostlySent(previous, job.endpointId, progress);
        if (this.stopped) break;
        const start: ReplayPosition = { after: progress.after, remaining: progress.remaining };
        const batch = await this.scheduleReplayBatch(job, progress, pendingSince);
        if (batch === "over") return;
        previous = batch;
        pendingSince = start;
      }
      await this.store.webhookRecovery.releaseReplay(job.endpointId, this.owner);
    } catch (error) {
      // Another instance holds the replay now (this one stalled past its lease), or the endpoint was deleted.
      if (!(error instanceof ReplayLeaseLost)) throw error;
    }
  }

  /**
   * Schedules up to a batch in transactions of at most REPLAY_WRITE_CHUNK events, letting the event loop run
   * between them: on SQLite a transaction holds the one connection (and its synchronous statements the event loop)
   * until it commits, so a whole batch at once held live deliveries' claims and outcomes back for its length.
   * "over": this instance schedules no more of it (the replay ended, or paused with its endpoint disabled).
   */
  private async scheduleReplayBatch(
    job: ReplayJob,
    progress: ReplayProgress,
    pendingSince: ReplayPosition,
  ): Promise<string[] | "over"> {
    const scheduled: string[] = [];
    while (scheduled.length < this.options.replayBatchSize && !this.stopped) {
      if (scheduled.length > 0) await new Promise((resolve) => setImmediate(resolve));
      const limit = Math.min(REPLAY_WRITE_CHUNK, this.options.replayBatchSize - scheduled.length, progress.remaining);
      const chunk = await this.scheduleReplayChunk(job, limit, progress, pendingSince);
      if (chunk === "over") return "over";
      scheduled.push(...chunk);
      this.notifyScheduled(job.endpointId);
      if (progress.remaining <= 0) return "over";
    }
    return scheduled;
  }

  /**
   * One transaction: the endpoint as it is now (its filters select the chunk's events; disabled, the replay pauses;
   * deleted, it is over, its row gone with it), the events' existing deliveries due again, new deliveries for the
   * others, and the replay's row moved past them (or deleted with the last one), so a replay resumed elsewhere
   * neither skips nor repeats a chunk. Moves `progress` once committed. A pause puts the row back to
   * `pendingSince`: the disabling failed what was pending, so those batches are sent again on resume.
   */
  private async scheduleReplayChunk(
    job: ReplayJob,
    limit: number,
    progress: ReplayProgress,
    pendingSince: ReplayPosition,
  ): Promise<string[] | "over"> {
    const lease = this.lease();
    const outcome = await this.store.transaction(async (store): Promise<ChunkOutcome> => {
      const recovery = store.webhookRecovery;
      await recovery.lockEndpointForReplay(job.endpointId);
      const endpoint = await store.webhooks.findEndpoint(job.organizationId, job.endpointId);
      if (!endpoint) return "over";
      if (!endpoint.enabled) {
        // Paused: the row stays, unleased; the instances' resume loop takes it again once the endpoint is enabled.
        const { after, remaining } = pendingSince;
        if (!(await recovery.advanceReplay(job.endpointId, after, remaining, lease))) throw new ReplayLeaseLost();
        await recovery.releaseReplay(job.endpointId, this.owner);
        return "over";
      }
      const events = await recovery.replayableEvents(selectionOf(job, endpoint), progress.after, limit);
      // The window holds fewer matching events than counted (filters narrowed, retention): the replay is over.
      if (events.length === 0) {
        await recovery.endReplay(job.endpointId, this.owner);
        return "over";
      }
      const last = events.at(-1)!;
      const after: LogPosition = { occurredAt: last.occurredAt, id: last.id };
      const remaining = progress.remaining - events.length;
      if (!(await recovery.advanceReplay(job.endpointId, after, remaining, lease))) throw new ReplayLeaseLost();
      const ids = await this.scheduleEvents(store, endpoint, events);
      return { ids, after, remaining };
    });
    if (outcome === "over") return outcome;
    const renewedAt = lease.expiresAt.getTime() - this.options.replayLeaseMs;
    Object.assign(progress, { after: outcome.after, remaining: outcome.remaining, renewedAt });
    return outcome.ids;
  }

  /**
   * In the chunk's transaction: the events' existing deliveries due again (under their webhook-ids), new ones for
   * the others; on an ordered endpoint, one behind a later delivery of its reference in flight waits for it.
   */
  private async scheduleEvents(
    store: Store,
    endpoint: WebhookEndpoint,
    events: readonly LifecycleEvent[],
  ): Promise<string[]> {
    const ordered = endpoint.ordering === "reference";
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
        droppedReason: null,
      }));
    await store.webhooks.insertDeliveries(fresh);
    const ids = [...reused, ...fresh.map((delivery) => delivery.id)];
    if (ordered) await store.webhookRecovery.deferBehindInFlight(ids, now);
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
    const half = previous.length / 2;
    let last: { pending: number; at: number } | null = null;
    for (;;) {
      if (this.stopped) return;
      const pending = await this.store.webhookRecovery.countPending(previous);
      if (pending <= half) return;
      // A receiver that is slow or down may hold the replay here longer than its lease: renewed at a third of it.
      if (this.clock.now().getTime() - progress.renewedAt > this.options.replayLeaseMs / 3) {
        const lease = this.lease();
        if (!(await this.store.webhookRecovery.advanceReplay(endpointId, progress.after, progress.remaining, lease)))
          throw new ReplayLeaseLost();
        progress.renewedAt = lease.expiresAt.getTime() - this.options.replayLeaseMs;
      }
      const at = performance.now();
      await new Promise((resolve) => setTimeout(resolve, this.pollDelay(pending, half, last, at)));
      last = { pending, at };
    }
  }

  /**
   * How long to wait before counting again: about the time the batch takes to drain to half at the rate seen since
   * the last count, between replayPollMs and 10 times it. Polled every replayPollMs, the count was a third of the
   * database time of a replay on PostgreSQL (about 40 counts of 1,000 ids per batch), taken from live deliveries.
   */
  private pollDelay(pending: number, half: number, last: { pending: number; at: number } | null, at: number): number {
    const min = this.options.replayPollMs;
    if (!last) return min;
    const drainedPerMs = (last.pending - pending) / Math.max(1, at - last.at);
    return drainedPerMs > 0 ? Math.min(10 * min, Math.max(min, (pending - half) / drainedPerMs)) : 10 * min;
  }

  private track(endpointId: string, replay: Promise<void>): void {
    const tracked = replay
      .catch((error: unknown) => this.replayFailed(error, endpointId))
      .finally(() => this.replays.delete(tracked));
    this.replays.add(tracked);
  }
}

/** What a chunk's transaction did: scheduled these deliveries and moved the row so, or ended this run. */
type ChunkOutcome = { ids: string[]; after: LogPosition; remaining: number } | "over";

/** The job's window with the endpoint's filters as they are now. */
function selectionOf(job: ReplayJob, endpoint: WebhookEndpoint): ReplaySelection {
  const { since, until, organizationId } = job;
  return { since, until, organizationId, eventTypes: endpoint.eventTypes, tagIds: endpoint.tagIds };
}

/** A place in a replay: the last event scheduled and how many are left. */
interface ReplayPosition {
  readonly after: LogPosition | null;
  readonly remaining: number;
}

/** Where a running replay stands (mirrors its row once each chunk commits). */
interface ReplayProgress {
  after: LogPosition | null;
  remaining: number;
  /** When its lease was last renewed (epoch ms). */
  renewedAt: number;
}
