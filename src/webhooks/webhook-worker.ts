import { randomUUID } from "node:crypto";
import { setMaxListeners } from "node:events";
import { hostname } from "node:os";
import type { FastifyBaseLogger } from "fastify";
import { runInBackground } from "../domain/shared/background-work.ts";
import type { Clock } from "../domain/shared/clock.ts";
import { parseRetryAfter } from "../domain/webhooks/retry-policy.ts";
import type { ClaimedDelivery } from "../domain/webhooks/delivery-attempts.ts";
import type { WebhookDeliveryService } from "../domain/webhooks/webhook-delivery-service.ts";
import { DeliverySlots } from "./delivery-slots.ts";
import { OutcomeRecorder } from "./outcome-recorder.ts";
import { ReadsFirst } from "./reads-first.ts";
import type { WebhookMetrics } from "./webhook-metrics.ts";
import { outgoingDelivery, type DeliveryTransport } from "./destinations/delivery-transport.ts";

export interface WebhookWorkerOptions {
  /** Requests in flight at once, all endpoints. */
  readonly concurrency: number;
  /** Requests in flight at once to the endpoints of one organization. */
  readonly concurrencyPerOrganization: number;
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
  /** Whether API reads wait to be served (the read admission's queue): backlog then yields (reads-first.ts). */
  readonly readsWaiting?: () => boolean;
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

/**
 * After a claim leased throttled deliveries, the worker claims again this much later: a throttled endpoint's
 * schedule opens slots continuously (throttle-schedule.ts), and no commit announces them.
 */
const THROTTLE_RECLAIM_MS = 250;

/** A claimed delivery is started only while its lease outlasts the timeout by this much; else handed back. */
const LEASE_MARGIN_MS = 250;

/** While backlog waits for reads (reads-first.ts), the worker looks again this often: nothing else may wake it. */
const BACKLOG_RECHECK_MS = 10;

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
  /** Requests begun, until their outcome is recorded too. */
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Claimed deliveries waiting to start, and the slots of the requests on the wire. */
  private readonly slots: DeliverySlots;
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
  /** Wakes the worker as throttled endpoints' schedules open new slots, for those with deliveries left. */
  private throttleTimer: NodeJS.Timeout | null = null;
  /** Starts the waiting deliveries whose slot comes next (throttled endpoints), at that slot. */
  private slotTimer: { readonly at: number; readonly timer: NodeJS.Timeout } | null = null;
  /** A round's start check has not begun its requests yet (one at a time: see `startRound`). */
  private checking = false;
  /** Slots freed meanwhile: another round is looked for once its requests have begun. */
  private startAgain = false;
  /** Backlog deliveries wait while API reads wait (reads-first.ts). */
  private readonly readsFirst: ReadsFirst;
  private backlogTimer: NodeJS.Timeout | null = null;
  /** Start checks not ended yet (shutdown waits for them). */
  private readonly checks = new Set<Promise<void>>();
  private readonly outcomes: OutcomeRecorder;
  /** Aborts the requests in flight once `stop`'s grace has run out: one signal for all, cheaper than one each. */
  private readonly shutdown = new AbortController();

  constructor(
    private readonly deliveries: WebhookDeliveryService,
    private readonly sender: DeliveryTransport,
    private readonly clock: Clock,
    private readonly metrics: WebhookMetrics,
    private readonly log: FastifyBaseLogger,
    private readonly options: WebhookWorkerOptions,
  ) {
    this.slots = new DeliverySlots(options);
    this.readsFirst = new ReadsFirst(options.readsWaiting);
    // Each request in flight listens to it: up to `concurrency` listeners, not a leak.
    setMaxListeners(0, this.shutdown.signal);
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

  /**
   * Looks for due deliveries now (or right after the current look). Cheap to call often. Called from a request's
   * commit, it starts the claims in the background (src/domain/shared/background-work.ts): they, and the attempts
   * and timers they lead to, belong to no request.
   */
  wake(): void {
    this.wokenFromOutside = true;
    this.drained = false;
    runInBackground(() => this.refill());
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
   * A throttled endpoint got slots up to its claim's horizon: what it has left gets later slots, which no commit
   * announces, so the worker wakes itself to claim them.
   */
  private wakeForSchedule(): void {
    if (this.stopped || this.throttleTimer) return;
    this.throttleTimer = setTimeout(() => {
      this.throttleTimer = null;
      this.wake();
    }, THROTTLE_RECLAIM_MS);
    this.throttleTimer.unref();
  }

  /** Looks for waiting deliveries to start at `at`, the next slot of a throttled delivery (unless sooner). */
  private startAtSlot(at: number): void {
    if (this.stopped || (this.slotTimer && this.slotTimer.at <= at)) return;
    if (this.slotTimer) clearTimeout(this.slotTimer.timer);
    const timer = setTimeout(
      () => {
        this.slotTimer = null;
        this.startWaiting();
      },
      Math.max(0, at - this.clock.now().getTime()),
    );
    timer.unref();
    this.slotTimer = { at, timer };
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
    if (this.throttleTimer) clearTimeout(this.throttleTimer);
    if (this.slotTimer) clearTimeout(this.slotTimer.timer);
    if (this.backlogTimer) clearTimeout(this.backlogTimer);
    this.outcomes.stop();
    await this.pumping;
    await Promise.all(this.checks);
    await this.handBack(this.slots.takeAllWaiting(), false);
    const all = () => Promise.all(this.inFlight.values());
    let graceTimer: NodeJS.Timeout | undefined;
    await Promise.race([all(), new Promise<void>((resolve) => (graceTimer = setTimeout(resolve, graceMs)))]);
    clearTimeout(graceTimer);
    this.shutdown.abort();
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
      const unrecorded = this.inFlight.size - this.slots.sending;
      if (unrecorded > MAX_UNRECORDED_FACTOR * this.options.concurrency || this.stopped) return;
      const ahead = (CLAIM_AHEAD_FACTOR + 1) * this.options.concurrency;
      const perEndpointAhead = (CLAIM_AHEAD_PER_ENDPOINT_FACTOR + 1) * this.options.concurrencyPerEndpoint;
      const perOrganizationAhead = (CLAIM_AHEAD_PER_ENDPOINT_FACTOR + 1) * this.options.concurrencyPerOrganization;
      const capacity = ahead - this.slots.held;
      if (capacity <= 0) return;
      const { limits, organizationLimits, room, refillDue } = this.slots.claimRoom(
        perEndpointAhead,
        perOrganizationAhead,
        REFILL_BELOW_ROUNDS * this.options.concurrencyPerEndpoint,
      );
      if (!fromOutside && !refillDue && this.drained) return;
      // A refill of known endpoints asks for their room only: the claim's candidate window is a multiple of what
      // it asks for, and a wider one would only read further into the same endpoints' backlogs.
      const refillOnly = !fromOutside && this.drained && limits.size > 0;
      const limit = refillOnly ? Math.min(capacity, room) : capacity;
      const claimed = await this.deliveries.claim(this.owner, limit, limits, perEndpointAhead, {
        limits: organizationLimits,
        defaultLimit: perOrganizationAhead,
      });
      if (claimed.length === 0) this.drained = true;
      if (claimed.some((item) => item.slotAt !== null)) this.wakeForSchedule();
      this.slots.enqueue(claimed);
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
    if (this.stopped) return;
    const at = this.clock.now();
    const now = at.getTime();
    const readsHold = this.readsFirst.holdsForRound(now);
    let nextSlot = Number.POSITIVE_INFINITY;
    let heldForReads = false;
    const { round, refused } = this.slots.takeRound({
      // A throttled delivery waits for its slot (queued in slot order: the ones behind it wait too).
      holds: (next) => {
        const slot = next.slotAt?.getTime() ?? 0;
        if (slot > now) {
          nextSlot = Math.min(nextSlot, slot);
          return true;
        }
        const holds = readsHold(next);
        heldForReads ||= holds;
        return holds;
      },
      // A delivery whose lease would not outlast its request, or past its slot, is handed back instead.
      startable: (next) =>
        (next.delivery.leaseExpiresAt?.getTime() ?? 0) - now >= this.options.timeoutMs + LEASE_MARGIN_MS &&
        this.deliveries.isOnSchedule(next, at),
    });
    if (nextSlot !== Number.POSITIVE_INFINITY) this.startAtSlot(nextSlot);
    if (round.length > 0) this.startRound(round);
    if (refused.length > 0)
      void this.handBack(
        refused,
        refused.some((item) => item.slotAt !== null),
      );
    if (heldForReads && !this.backlogTimer) {
      this.backlogTimer = setTimeout(() => {
        this.backlogTimer = null;
        this.startWaiting();
      }, BACKLOG_RECHECK_MS);
    }
  }

  /** Hands leases back (sent again later, by any instance); they may be claimed again, at once when `wake`. */
  private handBack(deliveries: readonly ClaimedDelivery[], wake: boolean): Promise<void> {
    return this.deliveries.release(deliveries).then(
      () => {
        this.drained = false;
        if (wake) this.wakeSoon();
      },
      (error: unknown) => this.log.error({ err: error }, "webhook worker could not hand leases back"),
    );
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
      .startWithCurrentEndpoints(round, (current) =>
        // Called inside the check (on PostgreSQL, its transaction), which ends long before what it begins: the
        // requests, their outcomes and the claims they lead to are background work of their own.
        runInBackground(() => {
          begun = true;
          for (const claimed of current) this.dispatch(claimed);
          checked();
        }),
      )
      .catch((error: unknown) => {
        // Begun: only the check's end failed (its COMMIT), after the requests went out.
        if (begun)
          return this.log.error({ err: error }, "webhook worker's start check failed after its requests began");
        this.log.error({ err: error }, "webhook worker could not check endpoints before starting requests");
        for (const claimed of round) this.slots.giveSlotBack(claimed);
        checked();
        void this.handBack(round, true);
      })
      .finally(() => this.checks.delete(check));
    this.checks.add(check);
  }

  /** Sends a delivery in the slot `startWaiting` took for it. */
  private dispatch(claimed: ClaimedDelivery): void {
    const { id, endpointId } = claimed.delivery;
    const answered = this.readsFirst.started(claimed, this.clock.now().getTime());
    let endpointSlotHeld = true;
    // The endpoint's slot is given back as soon as its answer is in (the limit protects the endpoint), while
    // the outcome is still being recorded: the next requests to it overlap with that write.
    const releaseEndpointSlot = () => {
      if (!endpointSlotHeld) return;
      endpointSlotHeld = false;
      answered();
      this.slots.giveSlotBack(claimed);
      this.startWaiting();
      this.wakeSoon();
    };
    const done = this.deliver(claimed, this.shutdown.signal, releaseEndpointSlot)
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
    this.inFlight.set(id, done);
  }

  private async deliver(claimed: ClaimedDelivery, signal: AbortSignal, releaseEndpointSlot: () => void): Promise<void> {
    const { delivery } = claimed;
    const dropped = this.deliveries.dropReasonOf(claimed);
    if (dropped !== null || !this.deliveries.isSendable(claimed)) {
      await this.deliveries.abandon(claimed, dropped ?? "endpoint_deleted");
      this.drained = false;
      this.metrics.failed.inc({ reason: dropped ?? "endpoint_deleted" });
      return;
    }
    const attemptedAt = this.clock.now();
    if (!this.deliveries.isOnSchedule(claimed, attemptedAt)) {
      // Too long after its slot (the start check took long): sent now, it could crowd the endpoint's later slots.
      releaseEndpointSlot();
      await this.deliveries.release([claimed]);
      this.drained = false;
      this.wakeSoon();
      return;
    }
    const secrets = this.deliveries.signingSecrets(claimed.endpoint, attemptedAt);
    const result = await this.sender.send(outgoingDelivery(delivery, claimed.endpoint, secrets, attemptedAt), signal);
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
    this.metrics.countAttempt(verdict.kind, result.statusCode, delivery.eventType);
    if (disabledReason) {
      // The URL and ids only: secrets and bodies never reach the log.
      this.log.warn(
        { endpointId: delivery.endpointId, organizationId: delivery.organizationId, reason: disabledReason },
        "webhook endpoint disabled",
      );
    }
  }
}
