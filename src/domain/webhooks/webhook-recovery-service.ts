import type { LifecycleEvent } from "../lifecycle/lifecycle-event.ts";
import type { Clock } from "../shared/clock.ts";
import { parseDateTime } from "../shared/date-time.ts";
import { DomainError, notFound, validationFailed, type FieldIssue } from "../shared/errors.ts";
import { isUuid, newId } from "../shared/ids.ts";
import type { Store } from "../store.ts";
import { buildEventBody } from "./webhook-body.ts";
import type { WebhookDelivery, WebhookEndpoint } from "./webhook-models.ts";
import type { HeldBackSummary, LogPosition, ReplaySelection, TimeWindow } from "./webhook-recovery-repository.ts";

/** Raw window input from either surface: `since` required, `until` optional (default: now). */
export interface RecoveryWindowInput {
  readonly since?: unknown;
  readonly until?: unknown;
  /** Count only: nothing is sent, and the count is returned even above the limit. */
  readonly dryRun?: boolean;
}

export interface RecoveryOptions {
  /** Events read and scheduled per replay batch (one short transaction each). */
  readonly replayBatchSize: number;
  /** How often a replay looks whether its previous batch has mostly gone out. */
  readonly replayPollMs: number;
}

/** The most deliveries one recover or replay call may send (422 beyond, saying how many matched). */
export const MAX_DELIVERIES_PER_CALL = 100_000;

/** Events a replay schedules per transaction (a batch is written as several). */
const REPLAY_WRITE_CHUNK = 200;

const DEFAULT_OPTIONS: RecoveryOptions = { replayBatchSize: 1_000, replayPollMs: 20 };

/**
 * Recovery and replay of an endpoint's deliveries over a time window `[since, until)` (docs/decisions.md,
 * "Webhook recovery and replay"), and the summary of what an ordered endpoint holds back.
 *
 * - recover: the endpoint's deliveries created in the window whose last attempt failed or that were given up are
 *   due again now, with their webhook-id and body, unordered. The count and the scheduling are one transaction.
 * - replay: every event of the log in the window that the endpoint's filters match today is sent again, oldest
 *   first: under the webhook-id of the endpoint's existing delivery of the event if there is one, else as a new
 *   delivery whose body carries the event's tag snapshot. The count is the database's at the call; then a
 *   background task reads the window by keyset in batches and schedules each batch in its own short transaction
 *   once most of the previous one has gone out, so a large window is never in memory nor in the queue at once,
 *   and the other endpoints' deliveries keep their place in the claims.
 */
export class WebhookRecoveryService {
  private readonly scheduledListeners = new Set<(endpointId: string) => void>();
  private readonly replays = new Set<Promise<void>>();
  private stopped = false;
  private replayFailed: (error: unknown, endpointId: string) => void = () => undefined;
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
    const window = this.windowOf(input);
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
   * @throws NOT_FOUND, CONFLICT (endpoint disabled), VALIDATION_FAILED (window), LIMIT_EXCEEDED (> 100,000).
   */
  async replay(organizationId: string, endpointId: string, input: RecoveryWindowInput): Promise<number> {
    const endpoint = await this.sendableEndpoint(organizationId, endpointId);
    const selection: ReplaySelection = {
      ...this.windowOf(input),
      organizationId,
      eventTypes: endpoint.eventTypes,
      tagIds: endpoint.tagIds,
    };
    const count = await this.store.webhookRecovery.countReplayable(selection);
    if (input.dryRun) return count;
    refuseAboveLimit(count);
    if (count > 0) this.track(endpoint.id, this.runReplay(endpoint, selection, count));
    return count;
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
   * Told when a background replay stops on an error (the caller logs it); the batches it scheduled stay
   * scheduled, and replaying the window again sends the rest (receivers deduplicate by webhook-id).
   */
  onReplayFailed(listener: (error: unknown, endpointId: string) => void): void {
    this.replayFailed = listener;
  }

  /** Stops scheduling replay batches (shutdown) and waits for the batch being written. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.allSettled([...this.replays]);
  }

  /** Resolves once every replay running now has scheduled its last batch (tests, benchmarks). */
  async settled(): Promise<void> {
    while (this.replays.size > 0) await Promise.allSettled([...this.replays]);
  }

  private async runReplay(endpoint: WebhookEndpoint, selection: ReplaySelection, count: number): Promise<void> {
    let after: LogPosition | null = null;
    let scheduled = 0;
    let previous: string[] = [];
    // At most `count` events: the ones counted (an event committed into the window later, with an earlier time,
    // may take the place of the last one counted; see docs/decisions.md).
    while (scheduled < count && !this.stopped) {
      await this.waitUntilMostlySent(previous);
      if (this.stopped) return;
      const events = await this.store.webhookRecovery.replayableEvents(
        selection,
        after,
        Math.min(this.options.replayBatchSize, count - scheduled),
      );
      const last = events.at(-1);
      if (!last) return;
      previous = await this.scheduleReplayBatch(endpoint, events);
      scheduled += events.length;
      after = { occurredAt: last.occurredAt, id: last.id };
    }
  }

  /**
   * Schedules a batch in transactions of at most REPLAY_WRITE_CHUNK events, letting the event loop run between
   * them: on SQLite a transaction holds the one connection (and its synchronous statements the event loop) until
   * it commits, so a whole batch at once held live deliveries' claims and outcomes back for its length.
   */
  private async scheduleReplayBatch(endpoint: WebhookEndpoint, events: readonly LifecycleEvent[]): Promise<string[]> {
    const scheduled: string[] = [];
    for (let start = 0; start < events.length && !this.stopped; start += REPLAY_WRITE_CHUNK) {
      if (start > 0) await new Promise((resolve) => setImmediate(resolve));
      scheduled.push(...(await this.scheduleReplayChunk(endpoint, events.slice(start, start + REPLAY_WRITE_CHUNK))));
      this.notifyScheduled(endpoint.id);
    }
    return scheduled;
  }

  /** One transaction: the events' existing deliveries due again, new deliveries for the others. */
  private scheduleReplayChunk(endpoint: WebhookEndpoint, events: readonly LifecycleEvent[]): Promise<string[]> {
    const ordered = endpoint.ordering === "reference";
    return this.store.transaction(async (store) => {
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
  }

  /**
   * Waits while more than half of the previous batch is still pending: the queue holds at most about one and a
   * half batches of a replay, whatever the window, and a receiver that is down slows the replay down instead of
   * piling its retries up.
   */
  private async waitUntilMostlySent(previous: readonly string[]): Promise<void> {
    if (previous.length === 0) return;
    while (!this.stopped && (await this.store.webhookRecovery.countPending(previous)) * 2 > previous.length) {
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

  /** `[since, until)`, until defaulting to now. @throws VALIDATION_FAILED */
  private windowOf(input: RecoveryWindowInput): TimeWindow {
    const issues: FieldIssue[] = [];
    const since = dateOf(input.since);
    if (input.since === undefined || input.since === null)
      issues.push({ path: ["since"], code: "REQUIRED", message: "{since} is required" });
    else if (!since)
      issues.push({ path: ["since"], code: "INVALID_DATE_TIME", message: "{since} must be an ISO 8601 date-time" });
    const untilGiven = input.until !== undefined && input.until !== null;
    const until = untilGiven ? dateOf(input.until) : this.clock.now();
    if (!until)
      issues.push({ path: ["until"], code: "INVALID_DATE_TIME", message: "{until} must be an ISO 8601 date-time" });
    if (since && until) {
      const cutoff = this.retentionCutoff();
      if (since < cutoff)
        issues.push({
          path: ["since"],
          code: "BEFORE_RETENTION",
          message: `{since} is older than the log's retention: the oldest allowed is ${cutoff.toISOString()}`,
        });
      else if (since > until)
        issues.push({
          path: ["since"],
          code: "AFTER_UNTIL",
          message: untilGiven ? "{since} must not be after {until}" : "{since} must not be in the future",
        });
    }
    if (issues.length > 0 || !since || !until) throw validationFailed(issues);
    return { since, until };
  }
}

/** A date-time from REST (text) or GraphQL (already a Date); null when malformed. */
function dateOf(value: unknown): Date | null {
  return value instanceof Date ? value : parseDateTime(value);
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
