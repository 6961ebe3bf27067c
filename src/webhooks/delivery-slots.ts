import type { ClaimedDelivery } from "../domain/webhooks/webhook-delivery-service.ts";

/** What the next claim may take: room per endpoint already known, and whether a refill of them is due. */
export interface ClaimRoom {
  /** Per endpoint with deliveries waiting or in flight: how many more it may have claimed (may be ≤ 0). */
  readonly limits: Map<string, number>;
  /** The positive rooms added up: what a refill of the known endpoints could take. */
  readonly room: number;
  /** Some endpoint has room and fewer than the refill mark of deliveries waiting (or none is known at all). */
  readonly refillDue: boolean;
}

/**
 * The webhook worker's bookkeeping of what it claimed (webhook-worker.ts): the deliveries waiting to start, in one
 * queue per endpoint, oldest first, and the request slots taken, in all and per endpoint. Deliveries start
 * round-robin over the endpoints, each within its endpoint's limit: a slow or dead endpoint holds a bounded number
 * of slots and the others keep flowing.
 */
export class DeliverySlots {
  /** Requests on the wire. */
  private sendingCount = 0;
  /** Requests on the wire per endpoint. */
  private readonly sendingPerEndpoint = new Map<string, number>();
  /** Claimed deliveries not started yet, per endpoint, oldest first (a Map keeps the round-robin order). */
  private readonly waiting = new Map<string, ClaimedDelivery[]>();
  private waitingCount = 0;

  constructor(
    /** Requests on the wire at once, all endpoints. */
    private readonly concurrency: number,
    /** Requests on the wire at once to one endpoint. */
    private readonly concurrencyPerEndpoint: number,
  ) {}

  get sending(): number {
    return this.sendingCount;
  }

  /** Deliveries claimed and not started, plus requests on the wire. */
  get held(): number {
    return this.sendingCount + this.waitingCount;
  }

  /** The room of each known endpoint for the next claim, up to `perEndpointAhead` claimed per endpoint. */
  claimRoom(perEndpointAhead: number, refillBelow: number): ClaimRoom {
    const limits = new Map<string, number>();
    let room = 0;
    let refillDue = false;
    for (const endpointId of new Set([...this.sendingPerEndpoint.keys(), ...this.waiting.keys()])) {
      const waiting = this.waiting.get(endpointId)?.length ?? 0;
      const left = perEndpointAhead - (this.sendingPerEndpoint.get(endpointId) ?? 0) - waiting;
      limits.set(endpointId, left);
      room += Math.max(0, left);
      if (left > 0 && waiting < refillBelow) refillDue = true;
    }
    // Every request answered: the endpoints it sent to are no longer known, and may have more.
    return { limits, room, refillDue: refillDue || limits.size === 0 };
  }

  enqueue(claimed: readonly ClaimedDelivery[]): void {
    for (const delivery of claimed) {
      const queue = this.waiting.get(delivery.delivery.endpointId);
      if (queue) queue.push(delivery);
      else this.waiting.set(delivery.delivery.endpointId, [delivery]);
    }
    this.waitingCount += claimed.length;
  }

  /**
   * Takes waiting deliveries, one endpoint after the other, while slots are free: each endpoint's oldest that
   * `holds` does not keep back (those kept stay queued in their order; `held` says some were); those `startable`
   * accepts take a slot and make the round; the others leave the queue as `refused`, without a slot.
   */
  takeRound(rules: {
    readonly holds: (next: ClaimedDelivery) => boolean;
    readonly startable: (next: ClaimedDelivery) => boolean;
  }): { round: ClaimedDelivery[]; refused: ClaimedDelivery[]; held: boolean } {
    const round: ClaimedDelivery[] = [];
    const refused: ClaimedDelivery[] = [];
    let held = false;
    let took = true;
    while (took && this.sendingCount < this.concurrency) {
      took = false;
      for (const [endpointId, queue] of this.waiting) {
        if (this.sendingCount >= this.concurrency) break;
        if ((this.sendingPerEndpoint.get(endpointId) ?? 0) >= this.concurrencyPerEndpoint) continue;
        // Passing over what `holds` is safe: an endpoint's queue holds at most one delivery of a reference whose
        // order it keeps (the claim leases heads only), so starting a later one first changes no promised order.
        const index = queue.findIndex((candidate) => !rules.holds(candidate));
        if (index !== 0) held = true;
        if (index === -1) continue;
        const [next] = queue.splice(index, 1) as [ClaimedDelivery];
        this.waitingCount--;
        // Moved to the back: the next round starts with the endpoints that did not get a slot in this one.
        this.waiting.delete(endpointId);
        if (queue.length > 0) this.waiting.set(endpointId, queue);
        if (rules.startable(next)) {
          this.takeSlot(endpointId);
          round.push(next);
        } else {
          refused.push(next);
        }
        took = true;
      }
    }
    return { round, refused, held };
  }

  /** Empties the queues (shutdown): what was claimed and not started. */
  takeAllWaiting(): ClaimedDelivery[] {
    const all = [...this.waiting.values()].flat();
    this.waiting.clear();
    this.waitingCount = 0;
    return all;
  }

  giveSlotBack(endpointId: string): void {
    this.sendingCount--;
    const left = (this.sendingPerEndpoint.get(endpointId) ?? 1) - 1;
    if (left > 0) this.sendingPerEndpoint.set(endpointId, left);
    else this.sendingPerEndpoint.delete(endpointId);
  }

  private takeSlot(endpointId: string): void {
    this.sendingPerEndpoint.set(endpointId, (this.sendingPerEndpoint.get(endpointId) ?? 0) + 1);
    this.sendingCount++;
  }
}
