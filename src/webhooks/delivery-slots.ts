import type { ClaimedDelivery } from "../domain/webhooks/delivery-attempts.ts";

/** What the next claim may take: room per endpoint already known, and whether a refill of them is due. */
export interface ClaimRoom {
  /** Per endpoint with deliveries waiting or in flight: how many more it may have claimed (may be ≤ 0). */
  readonly limits: Map<string, number>;
  /** Per organization with deliveries waiting or in flight: how many more its endpoints together may have claimed. */
  readonly organizationLimits: Map<string, number>;
  /** The positive rooms added up: what a refill of the known endpoints could take. */
  readonly room: number;
  /** Some endpoint has room and fewer than the refill mark of deliveries waiting (or none is known at all). */
  readonly refillDue: boolean;
}

/** The limits of the slots: requests on the wire at once. */
export interface SlotLimits {
  /** All endpoints of all organizations. */
  readonly concurrency: number;
  /** The endpoints of one organization together (issue 49.1: a tenant's dead receivers cost its own share). */
  readonly concurrencyPerOrganization: number;
  /** One endpoint. */
  readonly concurrencyPerEndpoint: number;
}

/** An organization's claimed deliveries not started yet: one queue per endpoint, oldest first. */
type OrganizationQueues = Map<string, ClaimedDelivery[]>;

/**
 * The webhook worker's bookkeeping of what it claimed (webhook-worker.ts): the deliveries waiting to start, in one
 * queue per endpoint grouped by organization, and the request slots taken, in all, per organization and per
 * endpoint. Deliveries start round-robin over the organizations, then over each organization's endpoints, each
 * within its organization's and its endpoint's limits: endpoints that never answer hold at most their
 * organization's share of the slots, and another organization's next delivery finds a free one.
 */
export class DeliverySlots {
  /** Requests on the wire. */
  private sendingCount = 0;
  private readonly sendingPerOrganization = new Map<string, number>();
  private readonly sendingPerEndpoint = new Map<string, number>();
  /** Claimed deliveries not started yet, per organization, then per endpoint (Maps keep the round-robin order). */
  private readonly waiting = new Map<string, OrganizationQueues>();
  private readonly waitingPerOrganization = new Map<string, number>();
  /** Each endpoint's organization, while it has deliveries waiting or on the wire. */
  private readonly organizationOf = new Map<string, string>();
  private waitingCount = 0;

  constructor(private readonly limits: SlotLimits) {}

  get sending(): number {
    return this.sendingCount;
  }

  /** Deliveries claimed and not started, plus requests on the wire. */
  get held(): number {
    return this.sendingCount + this.waitingCount;
  }

  /**
   * The room of each known endpoint for the next claim, up to `perEndpointAhead` claimed per endpoint and
   * `perOrganizationAhead` per organization: an organization at its limit has every known endpoint's room at 0, so
   * that its backlog behind dead receivers does not take the claims other organizations need.
   */
  claimRoom(perEndpointAhead: number, perOrganizationAhead: number, refillBelow: number): ClaimRoom {
    const limits = new Map<string, number>();
    const organizationLimits = new Map<string, number>();
    let refillDue = false;
    for (const [endpointId, organizationId] of this.organizationOf) {
      const waiting = this.waiting.get(organizationId)?.get(endpointId)?.length ?? 0;
      const organizationHeld =
        (this.sendingPerOrganization.get(organizationId) ?? 0) + (this.waitingPerOrganization.get(organizationId) ?? 0);
      const organizationLeft = perOrganizationAhead - organizationHeld;
      organizationLimits.set(organizationId, Math.max(0, organizationLeft));
      const left = Math.min(
        perEndpointAhead - (this.sendingPerEndpoint.get(endpointId) ?? 0) - waiting,
        organizationLeft,
      );
      limits.set(endpointId, left);
      if (left > 0 && waiting < refillBelow) refillDue = true;
    }
    // What a refill could take: each known endpoint's room, each organization's endpoints within its own.
    const roomByOrganization = new Map<string, number>();
    for (const [endpointId, organizationId] of this.organizationOf) {
      const left = Math.max(0, limits.get(endpointId)!);
      roomByOrganization.set(organizationId, (roomByOrganization.get(organizationId) ?? 0) + left);
    }
    let room = 0;
    for (const [organizationId, endpointsRoom] of roomByOrganization)
      room += Math.min(endpointsRoom, organizationLimits.get(organizationId)!);
    // Every request answered: the endpoints it sent to are no longer known, and may have more.
    return { limits, organizationLimits, room, refillDue: refillDue || limits.size === 0 };
  }

  enqueue(claimed: readonly ClaimedDelivery[]): void {
    for (const item of claimed) {
      const { organizationId, endpointId } = item.delivery;
      let queues = this.waiting.get(organizationId);
      if (!queues) this.waiting.set(organizationId, (queues = new Map()));
      const queue = queues.get(endpointId);
      if (queue) queue.push(item);
      else queues.set(endpointId, [item]);
      this.organizationOf.set(endpointId, organizationId);
      add(this.waitingPerOrganization, organizationId, 1);
    }
    this.waitingCount += claimed.length;
  }

  /**
   * Takes waiting deliveries, one organization after the other and within each one endpoint after the other,
   * while slots are free: each endpoint's oldest that `holds` does not keep back (those kept stay queued in their
   * order); those `startable` accepts take a slot and make the round; the others leave the queue as `refused`,
   * without a slot.
   */
  takeRound(rules: {
    readonly holds: (next: ClaimedDelivery) => boolean;
    readonly startable: (next: ClaimedDelivery) => boolean;
  }): { round: ClaimedDelivery[]; refused: ClaimedDelivery[] } {
    const round: ClaimedDelivery[] = [];
    const refused: ClaimedDelivery[] = [];
    let took = true;
    while (took && this.sendingCount < this.limits.concurrency) {
      took = false;
      for (const [organizationId, queues] of this.waiting) {
        if (this.sendingCount >= this.limits.concurrency) break;
        if ((this.sendingPerOrganization.get(organizationId) ?? 0) >= this.limits.concurrencyPerOrganization) continue;
        const next = this.takeFromOrganization(organizationId, queues, rules.holds);
        if (!next) continue;
        took = true;
        // Moved to the back: the next pass starts with the organizations that did not get a slot in this one.
        this.waiting.delete(organizationId);
        if (queues.size > 0) this.waiting.set(organizationId, queues);
        if (rules.startable(next)) {
          this.takeSlot(next);
          round.push(next);
        } else {
          refused.push(next);
          this.forgetIfIdle(next.delivery.endpointId);
        }
      }
    }
    return { round, refused };
  }

  /** One delivery of the organization's next endpoint with a free slot and a delivery `holds` does not keep. */
  private takeFromOrganization(
    organizationId: string,
    queues: OrganizationQueues,
    holds: (next: ClaimedDelivery) => boolean,
  ): ClaimedDelivery | undefined {
    for (const [endpointId, queue] of queues) {
      if ((this.sendingPerEndpoint.get(endpointId) ?? 0) >= this.limits.concurrencyPerEndpoint) continue;
      // Passing over what `holds` is safe: an endpoint's queue holds at most one delivery of a reference whose
      // order it keeps (the claim leases heads only), so starting a later one first changes no promised order.
      const index = queue.findIndex((candidate) => !holds(candidate));
      if (index === -1) continue;
      const [next] = queue.splice(index, 1) as [ClaimedDelivery];
      this.waitingCount--;
      add(this.waitingPerOrganization, organizationId, -1);
      // Moved to the back: the organization's next slot goes to its next endpoint.
      queues.delete(endpointId);
      if (queue.length > 0) queues.set(endpointId, queue);
      return next;
    }
    return undefined;
  }

  /** Empties the queues (shutdown): what was claimed and not started. */
  takeAllWaiting(): ClaimedDelivery[] {
    const all = [...this.waiting.values()].flatMap((queues) => [...queues.values()].flat());
    this.waiting.clear();
    this.waitingPerOrganization.clear();
    this.waitingCount = 0;
    for (const item of all) this.forgetIfIdle(item.delivery.endpointId);
    return all;
  }

  giveSlotBack(claimed: ClaimedDelivery): void {
    const { organizationId, endpointId } = claimed.delivery;
    this.sendingCount--;
    add(this.sendingPerOrganization, organizationId, -1);
    add(this.sendingPerEndpoint, endpointId, -1);
    this.forgetIfIdle(endpointId);
  }

  private takeSlot(claimed: ClaimedDelivery): void {
    add(this.sendingPerOrganization, claimed.delivery.organizationId, 1);
    add(this.sendingPerEndpoint, claimed.delivery.endpointId, 1);
    this.sendingCount++;
  }

  /** An endpoint with nothing waiting and nothing on the wire is no longer known (nor is an empty organization). */
  private forgetIfIdle(endpointId: string): void {
    const organizationId = this.organizationOf.get(endpointId);
    if (organizationId === undefined || this.sendingPerEndpoint.has(endpointId)) return;
    const queues = this.waiting.get(organizationId);
    if (queues?.has(endpointId)) return;
    this.organizationOf.delete(endpointId);
    if (queues && queues.size === 0) this.waiting.delete(organizationId);
  }
}

/** Adds `delta` to a count, deleting it at 0. */
function add(counts: Map<string, number>, key: string, delta: number): void {
  const next = (counts.get(key) ?? 0) + delta;
  if (next > 0) counts.set(key, next);
  else counts.delete(key);
}
