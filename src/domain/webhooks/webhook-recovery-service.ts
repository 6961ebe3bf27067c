import { CLI_CHANGE, type ChangeContext } from "../audit/audit-event.ts";
import type { AuditLogService } from "../audit/audit-log-service.ts";
import type { Clock } from "../shared/clock.ts";
import { DomainError, notFound } from "../shared/errors.ts";
import { isUuid } from "../shared/ids.ts";
import type { Store } from "../store.ts";
import { windowOf, type RecoveryWindowInput } from "./recovery-window.ts";
import type { WebhookEndpoint } from "./webhook-models.ts";
import type { HeldBackSummary, ReplayJob, ReplaySelection, ReplayStanding } from "./webhook-recovery-repository.ts";
import { ReplayRunner, type RecoveryOptions } from "./webhook-replay-runner.ts";

export type { RecoveryWindowInput } from "./recovery-window.ts";
export type { RecoveryOptions } from "./webhook-replay-runner.ts";

/** paused: the endpoint is disabled; nothing is scheduled until it is enabled again. */
export const REPLAY_STATES = ["running", "paused"] as const;
export type ReplayState = (typeof REPLAY_STATES)[number];

/** An endpoint's replay as its reads show it. */
export interface ReplayStatus extends ReplayStanding {
  readonly state: ReplayState;
}

/** The most deliveries one recover or replay call may send (422 beyond, saying how many matched). */
export const MAX_DELIVERIES_PER_CALL = 100_000;

/**
 * Recovery and replay of an endpoint's deliveries over a time window `[since, until)` (docs/decisions.md,
 * "Webhook recovery and replay"), and the summary of what an ordered endpoint holds back.
 *
 * - recover: the endpoint's deliveries created in the window whose last attempt failed or that were given up are
 *   due again now, with their webhook-id and body; on an ordered endpoint each goes out before the later pending
 *   deliveries of its reference, which wait behind it. The count and the scheduling are one transaction.
 * - replay: every event of the log in the window that the endpoint's filters match is sent again, oldest first:
 *   under the webhook-id of the endpoint's existing delivery of the event if there is one, else as a new delivery
 *   whose body carries the event's tag snapshot. The count is the database's at the call (an upper bound after);
 *   then a background task reads the window by keyset in batches and schedules each batch in short transactions
 *   once most of the previous one has gone out, so a large window is never in memory nor in the queue at once,
 *   and the other endpoints' deliveries keep their place in the claims. The window left (cursor and count) is a
 *   row of "webhook_replays", moved in each chunk's transaction and leased by the instance scheduling it, so a
 *   replay whose instance stops is resumed by any instance (`start`); the row's key allows one per endpoint.
 * - A replay follows the endpoint as it is at each chunk, whichever instance runs it (docs/decisions.md, "A replay
 *   follows the endpoint"): the chunk's transaction reads its filters and enabled state; disabled, the replay is
 *   paused (its row stays, unleased, until the endpoint is enabled again); deleted, the row goes with it.
 */
export class WebhookRecoveryService {
  private readonly scheduledListeners = new Set<(endpointId: string) => void>();
  private readonly runner: ReplayRunner;

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    /** Events before this are past the log's retention. */
    private readonly retentionCutoff: () => Date,
    /** Records recoveries and replays in the transaction that starts them. */
    private readonly audit: AuditLogService,
    options: Partial<RecoveryOptions> = {},
  ) {
    this.runner = new ReplayRunner(store, clock, options, (endpointId) => this.notifyScheduled(endpointId));
  }

  /**
   * Re-sends the endpoint's failed or given-up deliveries created in the window; returns how many.
   * @throws NOT_FOUND, CONFLICT (endpoint disabled), VALIDATION_FAILED (window), LIMIT_EXCEEDED (> 100,000).
   */
  async recover(
    organizationId: string,
    endpointId: string,
    input: RecoveryWindowInput,
    change: ChangeContext = CLI_CHANGE,
  ): Promise<number> {
    const endpoint = await this.sendableEndpoint(organizationId, endpointId);
    const window = windowOf(input, this.clock.now(), this.retentionCutoff());
    const now = this.clock.now();
    if (input.dryRun) return this.store.webhookRecovery.countRecoverable(endpoint.id, window, now);
    const count = await this.store.transaction(async (store) => {
      refuseAboveLimit(await store.webhookRecovery.countRecoverable(endpoint.id, window, now));
      const recovered = await store.webhookRecovery.recover(endpoint.id, window, now);
      await this.audit.record(store, change, {
        organizationId,
        action: "webhook_endpoint.recovery_started",
        target: { type: "webhook_endpoint", id: endpoint.id },
        changes: windowChanges(window, recovered),
      });
      return recovered;
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
  async replay(
    organizationId: string,
    endpointId: string,
    input: RecoveryWindowInput,
    change: ChangeContext = CLI_CHANGE,
  ): Promise<number> {
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
    const started = await this.store.transaction(async (store) => {
      if (!(await store.webhookRecovery.startReplay(job, this.runner.lease(), this.clock.now()))) return false;
      await this.audit.record(store, change, {
        organizationId,
        action: "webhook_endpoint.replay_started",
        target: { type: "webhook_endpoint", id: endpoint.id },
        changes: windowChanges(selection, count),
      });
      return true;
    });
    if (!started)
      throw new DomainError(
        "CONFLICT",
        "A replay of this webhook endpoint is still being scheduled; replay again once it has been",
      );
    this.runner.run(job);
    return count;
  }

  /** What an ordered endpoint holds back. @throws NOT_FOUND */
  async heldBack(organizationId: string, endpointId: string): Promise<HeldBackSummary> {
    const endpoint = await this.endpoint(organizationId, endpointId);
    return this.store.webhookRecovery.heldBack(endpoint.id);
  }

  /**
   * The endpoint's replay, if it has one: running, or paused while the endpoint is disabled (it resumes when
   * enabled). @throws NOT_FOUND
   */
  async replayOf(organizationId: string, endpointId: string): Promise<ReplayStatus | null> {
    const endpoint = await this.endpoint(organizationId, endpointId);
    const standing = await this.store.webhookRecovery.findReplay(endpoint.id);
    return standing && { ...standing, state: endpoint.enabled ? "running" : "paused" };
  }

  /**
   * Resumes the replays no instance holds (their instance stopped, or died and its lease expired, or their
   * endpoint was enabled again), now and then every few seconds, until `stop`.
   */
  start(): void {
    this.runner.start();
  }

  /**
   * Told when a background replay stops on an error (the caller logs it), or looking for replays to resume
   * failed (endpoint null). The replay's row stays leased to this instance until the lease expires; then any
   * instance resumes it from its last committed chunk.
   */
  onReplayFailed(listener: (error: unknown, endpointId: string | null) => void): void {
    this.runner.onReplayFailed(listener);
  }

  /** Stops scheduling replay batches (shutdown) and hands their leases back (see ReplayRunner.stop). */
  stop(): Promise<void> {
    return this.runner.stop();
  }

  /** Resolves once every replay running now has scheduled its last batch (tests, benchmarks). */
  settled(): Promise<void> {
    return this.runner.settled();
  }

  /** Called after deliveries were made due by a recovery or a replay batch (wakes the worker). */
  onScheduled(listener: (endpointId: string) => void): () => void {
    this.scheduledListeners.add(listener);
    return () => this.scheduledListeners.delete(listener);
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

function refuseAboveLimit(matched: number): void {
  if (matched <= MAX_DELIVERIES_PER_CALL) return;
  throw new DomainError(
    "LIMIT_EXCEEDED",
    `The window matches ${matched} deliveries; at most ${MAX_DELIVERIES_PER_CALL} are sent per call: narrow it`,
    [],
    { limit: MAX_DELIVERIES_PER_CALL, matched },
  );
}

/** What a recovery or a replay records in the audit log: its window and how many deliveries it scheduled. */
function windowChanges(window: { readonly since: Date; readonly until: Date }, count: number) {
  return {
    since: { from: null, to: window.since.toISOString() },
    until: { from: null, to: window.until.toISOString() },
    count: { from: null, to: count },
  };
}
