import type { Clock } from "../shared/clock.ts";
import { newId } from "../shared/ids.ts";
import type { Store } from "../store.ts";
import { storableText } from "./attempt-text.ts";
import type { DeliveryChange } from "./delivery-activity.ts";
import type { AttemptReport, AttemptResult, AttemptToRecord, ClaimedDelivery } from "./delivery-attempts.ts";
import { judgeLostAttempts, type LostAttempt } from "./lost-attempts.ts";
import { judgeAttempt, type AttemptVerdict } from "./retry-policy.ts";
import type { OpenAttempt } from "./webhook-attempt-log.ts";
import { isWithinSlot } from "./throttle-schedule.ts";
import type { DroppedReason, WebhookAttempt, WebhookDelivery, WebhookEndpoint } from "./webhook-models.ts";
import { takesDelivery } from "./webhook-outbox.ts";
import type { CountedLostAttempts, DeliveryLease, DeliveryTransition } from "./webhook-repository.ts";

export interface DeliveryRules {
  /** Delays of the retry schedule; its length is the number of attempts. */
  readonly scheduleMs: readonly number[];
  /** An endpoint failing without a success for this long is disabled. */
  readonly disableAfterMs: number;
  /** How long a claim holds. */
  readonly leaseMs: number;
  /** Succeeded deliveries (and their attempts) are deleted this long after they succeeded. */
  readonly retentionMs: number;
}

/**
 * The delivery rules the worker applies: what to claim, which secrets sign, and what an attempt's
 * outcome does to the delivery and its endpoint (retry, give up, disable). The worker only sends HTTP.
 */
export class WebhookDeliveryService {
  private readonly recordedListeners = new Set<(changes: readonly DeliveryChange[]) => void>();

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly rules: DeliveryRules,
    private readonly random: () => number = Math.random,
  ) {}

  /**
   * Deletes deliveries that succeeded longer than the retention ago, with their attempts, in batches of
   * `batchSize` (each its own short statement), at most `maxBatches`; returns how many were deleted. Pending and
   * failed deliveries are kept: they may still be sent, or re-sent by hand.
   */
  async pruneSucceededDeliveries(batchSize = 1_000, maxBatches = Number.POSITIVE_INFINITY): Promise<number> {
    const cutoff = this.retentionCutoff();
    let total = 0;
    for (let batch = 0; batch < maxBatches; batch++) {
      const deleted = await this.store.webhooks.deleteSucceededDeliveriesBefore(cutoff, batchSize);
      total += deleted;
      if (deleted < batchSize) break;
    }
    return total;
  }

  /** Deliveries that succeeded before this are pruned. */
  retentionCutoff(): Date {
    return new Date(this.clock.now().getTime() - this.rules.retentionMs);
  }

  /**
   * Leases up to `limit` due deliveries to instance `owner`, at most `perEndpointLimit.get(id) ??
   * defaultPerEndpointLimit` per endpoint, with their endpoints, under a lease token of this claim's own. A
   * delivery claimed again after its lease expired has its lost attempts counted first: one whose schedule ran
   * out is given up, one whose retry is not due yet is put back, neither is returned.
   */
  async claim(
    owner: string,
    limit: number,
    perEndpointLimit: ReadonlyMap<string, number>,
    defaultPerEndpointLimit: number,
    perOrganization?: { readonly limits: ReadonlyMap<string, number>; readonly defaultLimit: number },
  ): Promise<ClaimedDelivery[]> {
    if (limit <= 0) return [];
    const now = this.clock.now();
    const leaseToken = `${owner}:${newId()}`;
    const claimed = await this.store.webhooks.claimDueDeliveries({
      owner: leaseToken,
      now,
      leaseExpiresAt: new Date(now.getTime() + this.rules.leaseMs),
      limit,
      perEndpointLimit,
      defaultPerEndpointLimit,
      ...(perOrganization && {
        perOrganizationLimit: perOrganization.limits,
        defaultPerOrganizationLimit: perOrganization.defaultLimit,
      }),
    });
    if (claimed.length === 0) return [];
    // Lost attempts are counted in the transaction that closes them: never closed without being counted.
    const opened = await this.store.transaction(async (store) => {
      const lost = await store.webhookAttemptLog.closeLost(claimed.map((delivery) => delivery.id));
      const deliveries = lost.length === 0 ? claimed : await this.countLostAttempts(store, claimed, lost, leaseToken);
      const attempts = deliveries.map((delivery) => ({ id: newId(), deliveryId: delivery.id, openedAt: now }));
      await store.webhookAttemptLog.open(attempts);
      return deliveries.map((delivery, index): [WebhookDelivery, OpenAttempt] => [delivery, attempts[index]!]);
    });
    if (opened.length === 0) return [];
    const endpointIds = [...new Set(opened.map(([delivery]) => delivery.endpointId))];
    const endpoints = new Map((await this.store.webhooks.findEndpointsByIds(endpointIds)).map((e) => [e.id, e]));
    const slots = new Map(claimed.map((delivery) => [delivery.id, delivery.slotAt]));
    return opened.map(([delivery, attempt]) => ({
      delivery,
      endpoint: endpoints.get(delivery.endpointId) ?? null,
      attemptId: attempt.id,
      leaseToken,
      slotAt: slots.get(delivery.id) ?? null,
    }));
  }

  /** Counts the lost attempts of claimed deliveries; returns those this claim sends, with their counts moved. */
  private async countLostAttempts(
    store: Store,
    claimed: readonly WebhookDelivery[],
    lost: readonly LostAttempt[],
    leaseToken: string,
  ): Promise<WebhookDelivery[]> {
    const now = this.clock.now();
    const counted: CountedLostAttempts[] = [];
    const sent: WebhookDelivery[] = [];
    for (const delivery of claimed) {
      const its = lost.filter((attempt) => attempt.deliveryId === delivery.id);
      if (its.length === 0) {
        sent.push(delivery);
        continue;
      }
      const verdict = judgeLostAttempts(delivery, its, this.rules.scheduleMs, now, this.random);
      if (verdict.kind === "send") sent.push(verdict.delivery);
      const transition: DeliveryTransition =
        verdict.kind === "settle"
          ? verdict.transition
          : {
              at: now,
              status: "pending",
              attemptCount: verdict.delivery.attemptCount,
              attemptsSinceQueued: verdict.delivery.attemptsSinceQueued,
              nextAttemptAt: delivery.nextAttemptAt,
            };
      counted.push({ deliveryId: delivery.id, leaseToken, keepsLease: verdict.kind === "send", transition });
    }
    await store.webhooks.countLostAttempts(counted);
    return sent;
  }

  /**
   * The secrets that sign a request made at `at`: the current one, and every secret rotated out that has not
   * expired yet (each for 24 hours after its rotation).
   */
  signingSecrets(endpoint: WebhookEndpoint, at: Date): string[] {
    return [
      endpoint.secret,
      ...endpoint.previousSecrets.filter((previous) => previous.expiresAt > at).map((previous) => previous.secret),
    ];
  }

  /**
   * False when a throttled delivery's request, begun at `at`, would start too long after its slot: it could then
   * crowd the endpoint's later slots (throttle-schedule.ts). Hand it back with `release` (no attempt is counted);
   * a later claim gives it a slot of its own.
   */
  isOnSchedule(claimed: ClaimedDelivery, at: Date): boolean {
    return isWithinSlot(claimed.slotAt, at);
  }

  /**
   * Why the delivery must not start with its endpoint as `startWithCurrentEndpoints` saw it, or null when it may:
   * the endpoint was deleted or disabled, or its filters (event types, tags) no longer take the delivery's event,
   * whether it was queued live, by a recovery, a replay or by hand (SPEC §9.2). Then call `abandon` (a deleted
   * endpoint's delivery is gone with it).
   */
  dropReasonOf(claimed: ClaimedDelivery): DroppedReason | "endpoint_deleted" | null {
    if (claimed.endpoint === null) return "endpoint_deleted";
    if (!claimed.endpoint.enabled) return "endpoint_disabled";
    if (!takesDelivery(claimed.endpoint, claimed.delivery)) return "filter_excluded";
    return null;
  }

  /** True when `dropReasonOf` is null. */
  isSendable(claimed: ClaimedDelivery): claimed is ClaimedDelivery & { endpoint: WebhookEndpoint } {
    return this.dropReasonOf(claimed) === null;
  }

  /**
   * Begins the requests of claimed deliveries with their endpoints as they are now: calls `start` once, with the
   * deliveries whose endpoint changed since the claim paired with its current row (null when it was deleted), so
   * that `isSendable` and the request follow the change. `start` must begin the requests before it returns.
   * Guarantee (EndpointStartGate): once a change of an endpoint (an update, a disable, a deletion, a rotation) has
   * been acknowledged, no request begun by a later `start` follows its old state; a change committing meanwhile
   * waits for `start` to return. @throws when the check cannot be made: `start` was not called then.
   */
  async startWithCurrentEndpoints(
    claimed: readonly ClaimedDelivery[],
    start: (current: readonly ClaimedDelivery[]) => void,
  ): Promise<void> {
    // Deliveries whose endpoint was gone or disabled at the claim are abandoned whatever happened since.
    const endpoints = new Map<string, WebhookEndpoint>();
    for (const { endpoint } of claimed) if (endpoint?.enabled) endpoints.set(endpoint.id, endpoint);
    await this.store.webhookStarts.startWithCurrent([...endpoints.values()], (changed) =>
      start(
        changed.size === 0
          ? claimed
          : claimed.map((item) =>
              item.endpoint && changed.has(item.endpoint.id)
                ? { ...item, endpoint: changed.get(item.endpoint.id) ?? null }
                : item,
            ),
      ),
    );
  }

  /** Ends the delivery unsent, its drop's reason in the delivery log (`droppedReason`), no attempt counted. */
  async abandon(claimed: ClaimedDelivery, reason: DroppedReason | "endpoint_deleted"): Promise<void> {
    await this.store.webhookAttemptLog.drop([claimed.attemptId]);
    // A deleted endpoint's deliveries were deleted with it: nothing is left to write (the statement finds no row).
    const stored = reason === "endpoint_deleted" ? "endpoint_disabled" : reason;
    await this.store.webhooks.abandonDelivery(leaseOf(claimed), this.clock.now(), stored);
  }

  /**
   * Records attempts and applies their verdicts, all in one transaction of a few statements whatever their
   * number: the attempts, the deliveries' new states (those their claim still leases), the endpoints' failure
   * streaks (started by a failure, ended by a success), and the endpoints disabled by a 410 or by a streak longer
   * than the configured window, whose other waiting deliveries fail with them. The database decides each of these
   * by a conditional update, so instances recording at the same time agree. The receivers' text is stored
   * sanitized (src/domain/webhooks/attempt-text.ts). Results are in the order of `items`.
   */
  async recordAttempts(items: readonly AttemptToRecord[]): Promise<AttemptResult[]> {
    const now = this.clock.now();
    const judged = items.map(({ claimed, report }) => {
      // Two counts: every attempt of the delivery (what the API shows), and the attempts since it was last
      // (re)queued, which say how far along the retry schedule it is (a re-send starts the schedule again).
      const attemptCount = claimed.delivery.attemptCount + 1;
      const attemptsSinceQueued = claimed.delivery.attemptsSinceQueued + 1;
      const verdict = judgeAttempt(report, attemptsSinceQueued, this.rules.scheduleMs, now, this.random);
      const attempt: WebhookAttempt = {
        id: claimed.attemptId,
        deliveryId: claimed.delivery.id,
        attemptedAt: report.attemptedAt,
        statusCode: report.statusCode,
        error: storableText(report.error),
        latencyMs: Math.max(0, Math.round(report.latencyMs)),
        responseBody: storableText(report.responseBody),
      };
      const transition: DeliveryTransition =
        verdict.kind === "succeeded"
          ? { at: now, status: "succeeded", attemptCount, attemptsSinceQueued, nextAttemptAt: null }
          : verdict.kind === "retry"
            ? { at: now, status: "pending", attemptCount, attemptsSinceQueued, nextAttemptAt: verdict.at }
            : { at: now, status: "failed", attemptCount, attemptsSinceQueued, nextAttemptAt: null };
      return { claimed, report, verdict, attempt, transition, leaseToken: claimed.leaseToken };
    });
    const disabledBy = await this.store.transaction(async (store) => {
      const webhooks = store.webhooks;
      // The endpoints first, then the deliveries (their order locks, then their rows): the lock order of
      // src/store/sql/sql-store.ts, which a disable by hand follows too.
      const disabled = await this.settleEndpoints(webhooks, judged, now);
      await webhooks.finishAttempts(judged);
      await webhooks.failPendingDeliveries([...disabled.keys()], now);
      return disabled;
    });
    // The reason is reported once per disabled endpoint, with its first failed attempt of the batch.
    const reported = new Set<string>();
    const results = judged.map(({ claimed, verdict }): AttemptResult => {
      const endpointId = claimed.delivery.endpointId;
      const reason = verdict.kind === "succeeded" ? undefined : disabledBy.get(endpointId);
      if (reason === undefined || reported.has(endpointId)) return { verdict, disabledReason: null };
      reported.add(endpointId);
      return { verdict, disabledReason: reason };
    });
    this.notifyRecorded(items.map(({ claimed: { delivery } }) => delivery));
    return results;
  }

  /**
   * What a batch of outcomes does to its endpoints: failure streaks started by failures and ended by successes,
   * endpoints disabled by a 410 or by a streak longer than the configured window. Returns the endpoints it
   * disabled, with why. (An outcome of a delivery deleted meanwhile is of an endpoint deleted with it: its updates
   * find no row.)
   */
  private async settleEndpoints(
    webhooks: Store["webhooks"],
    judged: readonly { claimed: ClaimedDelivery; report: AttemptReport; verdict: AttemptVerdict }[],
    now: Date,
  ): Promise<Map<string, string>> {
    const goneReason = "The endpoint answered 410 Gone";
    const streakReason = `Every delivery attempt failed for ${describeDuration(this.rules.disableAfterMs)}`;
    // Only endpoints seen failing when their delivery was claimed: a streak that began after the claim is
    // ended by the next success instead.
    const recovered = judged
      .filter((item) => item.verdict.kind === "succeeded" && item.claimed.endpoint?.failingSince != null)
      .map((item) => item.claimed.delivery.endpointId);
    await webhooks.markEndpointsHealthy([...new Set(recovered)]);
    const failed = judged.filter((item) => item.verdict.kind !== "succeeded");
    if (failed.length === 0) return new Map<string, string>();
    const failingSince = new Map<string, Date>();
    for (const { claimed, report } of failed) {
      const known = failingSince.get(claimed.delivery.endpointId);
      if (!known || report.attemptedAt < known) failingSince.set(claimed.delivery.endpointId, report.attemptedAt);
    }
    await webhooks.markEndpointsFailing(failingSince);
    const gone = new Set(
      failed.filter((item) => item.verdict.kind === "gone").map((item) => item.claimed.delivery.endpointId),
    );
    const streaking = [...failingSince.keys()].filter((id) => !gone.has(id));
    const disabled = new Map<string, string>();
    for (const id of await webhooks.disableEndpoints([...gone], goneReason, now)) disabled.set(id, goneReason);
    const cutoff = new Date(now.getTime() - this.rules.disableAfterMs);
    for (const id of await webhooks.disableEndpoints(streaking, streakReason, now, cutoff))
      disabled.set(id, streakReason);
    return disabled;
  }

  /** Called after attempts were committed, with the deliveries they belong to (the operator page's feed). */
  onAttemptsRecorded(listener: (changes: readonly DeliveryChange[]) => void): () => void {
    this.recordedListeners.add(listener);
    return () => this.recordedListeners.delete(listener);
  }

  private notifyRecorded(deliveries: readonly WebhookDelivery[]): void {
    if (deliveries.length === 0 || this.recordedListeners.size === 0) return;
    const changes = deliveries.map((delivery) => ({
      organizationId: delivery.organizationId,
      endpointId: delivery.endpointId,
      deliveryId: delivery.id,
    }));
    // A listener's failure must never fail the worker that recorded the attempts.
    for (const listener of this.recordedListeners) {
      try {
        listener(changes);
      } catch {
        // listeners log their own failures
      }
    }
  }

  /**
   * Hands leases back (on shutdown, or a lease too short to start a request) so that no instance waits for them
   * to expire. `sent`: a request went out and was aborted: its attempt stays, as an outcome lost, and counts;
   * else the attempt opened by the claim is dropped.
   */
  async release(claimed: readonly ClaimedDelivery[], sent = false): Promise<void> {
    if (claimed.length === 0) return;
    const attemptIds = claimed.map((item) => item.attemptId);
    await this.store.transaction(async (store) => {
      if (sent) await store.webhookAttemptLog.close(attemptIds);
      else await store.webhookAttemptLog.drop(attemptIds);
      await store.webhooks.releaseDeliveries(claimed.map(leaseOf), sent);
    });
  }

  /** Deliveries waiting to be sent (due or scheduled), all organizations. */
  countPending(): Promise<number> {
    return this.store.webhooks.countPendingDeliveries();
  }
}

function leaseOf(claimed: ClaimedDelivery): DeliveryLease {
  return { deliveryId: claimed.delivery.id, leaseToken: claimed.leaseToken };
}

/** `432000000` -> `5 days`; `90000` -> `90 seconds`. */
export function describeDuration(ms: number): string {
  const units: [number, string][] = [
    [86_400_000, "day"],
    [3_600_000, "hour"],
    [60_000, "minute"],
    [1_000, "second"],
  ];
  for (const [size, name] of units) {
    if (ms >= size && ms % size === 0) return `${ms / size} ${name}${ms / size === 1 ? "" : "s"}`;
  }
  return `${ms} ms`;
}
