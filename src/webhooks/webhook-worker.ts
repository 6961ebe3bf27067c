import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { FastifyBaseLogger } from "fastify";
import type { Clock } from "../domain/shared/clock.ts";
import { parseRetryAfter } from "../domain/webhooks/retry-policy.ts";
import type { ClaimedDelivery, WebhookDeliveryService } from "../domain/webhooks/webhook-delivery-service.ts";
import { OutcomeRecorder } from "./outcome-recorder.ts";
import type { WebhookMetrics } from "./webhook-metrics.ts";
import type { WebhookSender } from "./webhook-sender.ts";

export interface WebhookWorkerOptions {
  /** Requests in flight at once, all endpoints. */
  readonly concurrency: number;
  /** Requests in flight at once to one endpoint. */
  readonly concurrencyPerEndpoint: number;
  readonly pollIntervalMs: number;
  /** The sender's timeout: a delivery is only started while its lease outlasts it. */
  readonly timeoutMs: number;
  /**
   * Whether an error means the database is away for a moment (a connection killed, a restart): an outcome whose
   * write failed so is written again while its lease holds, instead of being lost and the request sent again.
   */
  readonly isDatabaseUnavailable: (error: unknown) => boolean;
}

/** Slots freed within this long are filled by one claim. */
const CLAIM_BATCH_DELAY_MS = 3;

/**
 * Deliveries claimed ahead of the slots that will send them, as a multiple of the concurrency limits: while one
 * claim is on its way to the database the requests keep going out from what was claimed before.
 */
const CLAIM_AHEAD_FACTOR = 2;

/**
 * Per endpoint, up to this multiple of its concurrency waits claimed beyond its requests in flight. A refill after
 * answers (not a wake-up from outside) claims only once an endpoint has few rounds of requests waiting: a busy
 * endpoint is then refilled many deliveries at a time instead of one or two per claim. Profiled on one endpoint's
 * backlog, the claim statement was the largest single share of a delivery's CPU, run about once per delivery.
 */
const CLAIM_AHEAD_PER_ENDPOINT_FACTOR = 3;
/** ...refilled once fewer than this many rounds of its requests wait (answers arrive in bursts). */
const REFILL_BELOW_ROUNDS = 2;

/** No claim while more answered requests than this multiple of the concurrency wait for their outcome's write. */
const MAX_UNRECORDED_FACTOR = 2;

/** A claimed delivery is started only while its lease outlasts the timeout by this much; else handed back. */
const LEASE_MARGIN_MS = 250;

interface InFlight {
  readonly endpointId: string;
  readonly abort: AbortController;
  readonly done: Promise<void>;
}

/**
 * The delivery worker that runs inside each server process. It claims due deliveries from the outbox
 * in batches with a lease, sends them, and records each attempt through the WebhookDeliveryService, which applies
 * the retry and disable rules.
 *
 * - Woken by `wake()` (after a commit that queued deliveries, another instance's commit, a test or re-send
 *   queued), by answers freeing slots, and by a poll timer, so a wake-up that is missed (a retry falling due, a
 *   dead instance's lease expiring) costs at most one poll interval.
 * - Claims ahead, beyond the requests on the wire: up to twice `concurrency` in all and three rounds of
 *   `concurrencyPerEndpoint` per endpoint, so that requests keep going out while the next claim is on its way;
 *   outcomes waiting to be recorded do not count, unless more than twice `concurrency` of them wait. Answers
 *   refill an endpoint once fewer than two rounds of it wait (one claim then feeds it for a while); a wake-up from
 *   outside (a commit, the poll) always claims. Claimed deliveries wait in one queue per endpoint and are
 *   started round-robin over the endpoints, each within its endpoint's limit: a slow or dead endpoint holds a
 *   bounded number of slots and claims, and the others keep flowing. A delivery whose lease would no longer cover
 *   a whole request (timeout plus a margin) is handed back instead of sent.
 * - Begins each round of requests inside one start check of their endpoints (`startRound`): once a change of an
 *   endpoint has been answered, nothing claimed before it goes out as the endpoint was.
 * - Records outcomes in small batches, through the OutcomeRecorder (src/webhooks/outcome-recorder.ts): one
 *   outcome whose write fails never decides another's.
 * - Each claim leases under a token of its own (the instance's name and a claim id), so a late outcome of an
 *   earlier claim of a delivery never settles a later one.
 */
export class WebhookWorker {
  /** This instance's name: its claims' lease tokens in `lease_owner` start with it. */
  readonly owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
  private readonly inFlight = new Map<string, InFlight>();
  /** Requests in flight per endpoint. */
  private readonly perEndpoint = new Map<string, number>();
  /** Claimed deliveries not started yet, per endpoint, oldest first (a Map keeps the round-robin order). */
  private readonly waiting = new Map<string, ClaimedDelivery[]>();
  private waitingCount = 0;
  /** Requests on the wire (an entry of `inFlight` stays until its outcome is recorded too). */
  private sending = 0;
  private pumping: Promise<void> | null = null;
  private wokenWhilePumping = false;
  /** The pump was started by `wake()` (something may have fallen due), not only by answers freeing slots. */
  private wokenFromOutside = false;
  /**
   * A claim found nothing within its limits, and since then nothing has woken the worker from outside and no
   * outcome may have made a delivery due (a retry, an ordered delivery's successor, a lease handed back): a refill
   * then only claims for endpoints whose next round is not claimed yet. A claim that excludes every busy endpoint
   * scans past their backlogs and would find nothing new; what falls due later is found by the poll.
   */
  private drained = false;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private wakeTimer: NodeJS.Timeout | null = null;
  /** A round's start check has not begun its requests yet (one at a time: see `startRound`). */
  private checking = false;
  /** Slots freed meanwhile: another round is looked for once its requests have begun. */
  private startAgain = false;
  /** Start checks not ended yet (shutdown waits for them). */
  private readonly checks = new Set<Promise<void>>();
  private readonly outcomes: OutcomeRecorder;

  constructor(
    private readonly deliveries: WebhookDeliveryService,
    private readonly sender: WebhookSender,
    private readonly clock: Clock,
    private readonly metrics: WebhookMetrics,
    private readonly log: FastifyBaseLogger,
    private readonly options: WebhookWorkerOptions,
  ) {
    this.outcomes = new OutcomeRecorder(deliveries, clock, log, {
      isDatabaseUnavailable: options.isDatabaseUnavailable,
      inFlight: () => this.inFlight.size,
    });
  }

  start(): void {
    if (this.timer || this.stopped) return;
    this.timer = setInterval(() => this.wake(), this.options.pollIntervalMs);
    this.timer.unref();
    this.wake();
  }

  /** Looks for due deliveries now (or right after the current look). Cheap to call often. */
  wake(): void {
    this.wokenFromOutside = true;
    this.drained = false;
    this.refill();
  }

  private refill(): void {
    if (this.stopped) return;
    if (this.pumping) {
      this.wokenWhilePumping ||= this.wokenFromOutside;
      return;
    }
    this.pumping = this.pump()
      .catch((error: unknown) => this.log.error({ err: error }, "webhook worker could not claim deliveries"))
      .finally(() => {
        this.pumping = null;
        // A wake-up between the pump's last look and here would be lost: the pump had already decided to stop.
        if (this.wokenWhilePumping) {
          this.wokenWhilePumping = false;
          this.wake();
        }
      });
  }

  /**
   * Wakes in a moment: slots freed by answers arriving together are then filled by one claim, not one each.
   */
  private wakeSoon(): void {
    if (this.stopped || this.wakeTimer) return;
    this.wakeTimer = setTimeout(() => {
      this.wakeTimer = null;
      this.refill();
    }, CLAIM_BATCH_DELAY_MS);
  }

  /**
   * Stops claiming, lets requests in flight finish for up to `graceMs`, then aborts the rest and hands their
   * leases back (they are sent again, by this or another instance).
   */
  async stop(graceMs = 2_000): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    this.outcomes.stop();
    await this.pumping;
    await Promise.all(this.checks);
    const notStarted = [...this.waiting.values()].flat();
    this.waiting.clear();
    this.waitingCount = 0;
    await this.deliveries
      .release(notStarted)
      .catch((error: unknown) => this.log.error({ err: error }, "webhook worker could not hand leases back"));
    const all = () => Promise.all([...this.inFlight.values()].map((task) => task.done));
    let graceTimer: NodeJS.Timeout | undefined;
    await Promise.race([all(), new Promise<void>((resolve) => (graceTimer = setTimeout(resolve, graceMs)))]);
    clearTimeout(graceTimer);
    for (const task of this.inFlight.values()) task.abort.abort();
    await all();
    await this.sender.close();
  }

  private async pump(): Promise<void> {
    for (;;) {
      const fromOutside = this.wokenFromOutside || this.wokenWhilePumping;
      this.wokenWhilePumping = false;
      this.wokenFromOutside = false;
      // Answered requests whose outcomes are still being recorded hold no slot: counting them against the claim
      // left the slots idle while a batch of outcomes was on its way to the database. A database that records
      // more slowly than the requests come back still slows the claims down: past the limit nothing is claimed.
      const unrecorded = this.inFlight.size - this.sending;
      if (unrecorded > MAX_UNRECORDED_FACTOR * this.options.concurrency || this.stopped) return;
      const ahead = (CLAIM_AHEAD_FACTOR + 1) * this.options.concurrency;
      const perEndpointAhead = (CLAIM_AHEAD_PER_ENDPOINT_FACTOR + 1) * this.options.concurrencyPerEndpoint;
      const capacity = ahead - this.sending - this.waitingCount;
      if (capacity <= 0) return;
      const limits = new Map<string, number>();
      let refillDue = false;
      for (const endpointId of new Set([...this.perEndpoint.keys(), ...this.waiting.keys()])) {
        const waiting = this.waiting.get(endpointId)?.length ?? 0;
        const room = perEndpointAhead - (this.perEndpoint.get(endpointId) ?? 0) - waiting;
        limits.set(endpointId, room);
        if (room > 0 && waiting < REFILL_BELOW_ROUNDS * this.options.concurrencyPerEndpoint) refillDue = true;
      }
      // Every request answered: the endpoints it sent to are no longer known, and may have more.
      if (limits.size === 0) refillDue = true;
      if (!fromOutside && !refillDue && this.drained) return;
      // A refill of known endpoints asks for their room only: the claim's candidate window is a multiple of what
      // it asks for, and a wider one would only read further into the same endpoints' backlogs.
      let room = 0;
      for (const left of limits.values()) room += Math.max(0, left);
      const refillOnly = !fromOutside && this.drained && limits.size > 0;
      const limit = refillOnly ? Math.min(capacity, room) : capacity;
      const claimed = await this.deliveries.claim(this.owner, limit, limits, perEndpointAhead);
      if (claimed.length === 0) this.drained = true;
      for (const delivery of claimed) {
        const queue = this.waiting.get(delivery.delivery.endpointId);
        if (queue) queue.push(delivery);
        else this.waiting.set(delivery.delivery.endpointId, [delivery]);
      }
      this.waitingCount += claimed.length;
      this.startWaiting();
      if (claimed.length === 0 && !this.wokenWhilePumping) return;
    }
  }

  /**
   * Starts waiting deliveries, one endpoint after the other, while slots are free: their slots are taken here,
   * their requests begin once the start check has read their endpoints as they are now (`startRound`).
   */
  private startWaiting(): void {
    if (this.checking) {
      this.startAgain = true;
      return;
    }
    const expired: ClaimedDelivery[] = [];
    const round: ClaimedDelivery[] = [];
    let started = true;
    while (started && this.sending < this.options.concurrency && !this.stopped) {
      started = false;
      for (const [endpointId, queue] of this.waiting) {
        if (this.sending >= this.options.concurrency) break;
        if ((this.perEndpoint.get(endpointId) ?? 0) >= this.options.concurrencyPerEndpoint) continue;
        const next = queue.shift()!;
        this.waitingCount--;
        // Moved to the back: the next round starts with the endpoints that did not get a slot in this one.
        this.waiting.delete(endpointId);
        if (queue.length > 0) this.waiting.set(endpointId, queue);
        const leaseLeft = (next.delivery.leaseExpiresAt?.getTime() ?? 0) - this.clock.now().getTime();
        if (leaseLeft < this.options.timeoutMs + LEASE_MARGIN_MS) expired.push(next);
        else {
          this.takeSlot(endpointId);
          round.push(next);
        }
        started = true;
      }
    }
    if (round.length > 0) this.startRound(round);
    if (expired.length > 0)
      this.deliveries
        .release(expired)
        .then(() => {
          this.drained = false;
        })
        .catch((error: unknown) => this.log.error({ err: error }, "webhook worker could not hand leases back"));
  }

  /**
   * Begins a round's requests once one start check has read their endpoints as they are now (docs/decisions.md,
   * "Endpoint changes stop the requests claimed ahead"); a failed check hands the round's leases back. One check
   * at a time begins requests, so that slots freed meanwhile go to the next round together; a check's end (on
   * PostgreSQL, its COMMIT) overlaps with the next one.
   */
  private startRound(round: readonly ClaimedDelivery[]): void {
    let begun = false;
    this.checking = true;
    const checked = () => {
      this.checking = false;
      if (!this.startAgain) return;
      this.startAgain = false;
      queueMicrotask(() => this.startWaiting());
    };
    const check = this.deliveries
      .startWithCurrentEndpoints(round, (current) => {
        begun = true;
        for (const claimed of current) this.dispatch(claimed);
        checked();
      })
      .catch((error: unknown) => {
        // Begun: only the check's end failed (its COMMIT), after the requests went out.
        if (begun)
          return this.log.error({ err: error }, "webhook worker's start check failed after its requests began");
        this.log.error({ err: error }, "webhook worker could not check endpoints before starting requests");
        for (const claimed of round) this.giveSlotBack(claimed.delivery.endpointId);
        checked();
        this.deliveries
          .release(round)
          .then(() => {
            this.drained = false;
            this.wakeSoon();
          })
          .catch((releaseError: unknown) =>
            this.log.error({ err: releaseError }, "webhook worker could not hand leases back"),
          );
      })
      .finally(() => this.checks.delete(check));
    this.checks.add(check);
  }

  private takeSlot(endpointId: string): void {
    this.perEndpoint.set(endpointId, (this.perEndpoint.get(endpointId) ?? 0) + 1);
    this.sending++;
  }

  private giveSlotBack(endpointId: string): void {
    this.sending--;
    const left = (this.perEndpoint.get(endpointId) ?? 1) - 1;
    if (left > 0) this.perEndpoint.set(endpointId, left);
    else this.perEndpoint.delete(endpointId);
  }

  /** Sends a delivery in the slot `startWaiting` took for it. */
  private dispatch(claimed: ClaimedDelivery): void {
    const { id, endpointId } = claimed.delivery;
    let endpointSlotHeld = true;
    // The endpoint's slot is given back as soon as its answer is in (the limit protects the endpoint), while
    // the outcome is still being recorded: the next requests to it overlap with that write.
    const releaseEndpointSlot = () => {
      if (!endpointSlotHeld) return;
      endpointSlotHeld = false;
      this.giveSlotBack(endpointId);
      this.startWaiting();
      this.wakeSoon();
    };
    const abort = new AbortController();
    const done = this.deliver(claimed, abort.signal, releaseEndpointSlot)
      .catch((error: unknown) =>
        // The lease expires and the delivery is tried again: nothing is lost, at worst it is sent twice.
        this.log.error({ err: error, deliveryId: id, endpointId }, "webhook delivery could not be recorded"),
      )
      .finally(() => {
        this.inFlight.delete(id);
        if (endpointSlotHeld) releaseEndpointSlot();
        this.startWaiting();
        this.wakeSoon();
      });
    this.inFlight.set(id, { endpointId, abort, done });
  }

  private async deliver(claimed: ClaimedDelivery, signal: AbortSignal, releaseEndpointSlot: () => void): Promise<void> {
    const { delivery } = claimed;
    if (!this.deliveries.isSendable(claimed)) {
      await this.deliveries.abandon(claimed);
      this.drained = false;
      this.metrics.failed.inc({ reason: claimed.endpoint ? "endpoint_disabled" : "endpoint_deleted" });
      return;
    }
    const attemptedAt = this.clock.now();
    const result = await this.sender.send(
      {
        url: claimed.endpoint.url,
        webhookId: delivery.id,
        body: delivery.body,
        secrets: this.deliveries.signingSecrets(claimed.endpoint, attemptedAt),
        timestamp: attemptedAt,
        endpointId: delivery.endpointId,
        attempt: delivery.attemptCount + 1,
      },
      signal,
    );
    releaseEndpointSlot();
    if (result.aborted) {
      await this.deliveries.release([claimed], true);
      return;
    }
    this.metrics.attemptDuration.observe(result.latencyMs / 1000);
    const { verdict, disabledReason } = await this.outcomes.record({
      claimed,
      report: {
        attemptedAt,
        statusCode: result.statusCode,
        error: result.error,
        latencyMs: result.latencyMs,
        responseBody: result.responseBody,
        retryAfterMs: parseRetryAfter(result.retryAfter, this.clock.now()),
      },
    });
    // A retry (perhaps due at once) or the next delivery of an ordered reference may be claimable now.
    if (verdict.kind !== "succeeded" || delivery.orderingKey !== null) this.drained = false;
    this.metrics.attempts.inc({
      outcome: verdict.kind === "succeeded" ? "success" : result.statusCode === null ? "network_error" : "http_error",
    });
    if (verdict.kind === "succeeded") this.metrics.sent.inc({ event_type: delivery.eventType });
    else if (verdict.kind === "retry") this.metrics.retried.inc();
    else this.metrics.failed.inc({ reason: verdict.kind });
    if (disabledReason) {
      // The URL and ids only: secrets and bodies never reach the log.
      this.log.warn(
        { endpointId: delivery.endpointId, organizationId: delivery.organizationId, reason: disabledReason },
        "webhook endpoint disabled",
      );
    }
  }
}
