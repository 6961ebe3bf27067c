import type { LifecycleEvent } from "../lifecycle/lifecycle-event.ts";
import { newId } from "../shared/ids.ts";
import type { Store } from "../store.ts";
import { buildEventBody } from "./webhook-body.ts";
import { TEST_EVENT_TYPE, type EndpointRoute, type WebhookDelivery } from "./webhook-models.ts";

/**
 * The transactional outbox: called by the LifecycleRecorder inside the transaction that writes an
 * event, it writes one pending delivery per enabled endpoint of the organization whose filter matches. So an
 * event and its deliveries commit together or not at all, and a process that dies after the commit loses
 * nothing: the worker finds the rows.
 *
 * Routing: an endpoint receives an event when its event-type filter (null: every type) lists the event's type
 * AND its tag filter (null: every reference) shares a tag with the event's `referenceTags`, the snapshot of the
 * reference's tags taken when the event was written. So an event keeps the routing it had when it happened,
 * whatever is done to the reference's tags later; and a filter emptied by tag deletions matches nothing.
 */
export class WebhookOutbox {
  /**
   * The organization's enabled endpoints, read once per transaction (a transaction that records many events,
   * such as reporting 100 containers, asks once). Keyed by the transaction's store, so forgotten with it.
   */
  private readonly endpointsByTransaction = new WeakMap<Store, Map<string, Promise<EndpointRoute[]>>>();

  /** @param firstDelayMs the retry schedule's first entry: how long after the event the first attempt is due. */
  constructor(private readonly firstDelayMs: number) {}

  /** Starts the read of the organization's enabled endpoints, which enqueue and enqueueAll will use. */
  prepare(store: Store, organizationId: string): void {
    void this.enabledEndpoints(store, organizationId);
  }

  /** Writes the deliveries of `event` through `store` (a transaction's store). */
  async enqueue(store: Store, event: LifecycleEvent): Promise<void> {
    const deliveries = this.deliveriesOf(event, await this.enabledEndpoints(store, event.organizationId));
    if (deliveries.length > 0) await store.webhooks.insertDeliveries(deliveries);
  }

  /**
   * Writes the deliveries of many events of one organization through `store` (a transaction's store): one read
   * of the endpoints and one multi-row insert (cut in chunks only past the database's parameter limit).
   */
  async enqueueAll(store: Store, events: readonly LifecycleEvent[]): Promise<void> {
    const [first] = events;
    if (!first) return;
    if (events.some((event) => event.organizationId !== first.organizationId)) {
      throw new Error("enqueueAll takes the events of one organization");
    }
    const endpoints = await this.enabledEndpoints(store, first.organizationId);
    if (endpoints.length === 0) return;
    const deliveries = events.flatMap((event) => this.deliveriesOf(event, endpoints));
    if (deliveries.length > 0) await store.webhooks.insertDeliveries(deliveries);
  }

  /** One pending delivery of `event` per endpoint that routes it. */
  private deliveriesOf(event: LifecycleEvent, enabled: readonly EndpointRoute[]): WebhookDelivery[] {
    const endpoints = enabled.filter((endpoint) => routesTo(endpoint, event));
    if (endpoints.length === 0) return [];
    const body = buildEventBody(event);
    return endpoints.map((endpoint) => ({
      // The delivery id is the webhook-id: unique per event and endpoint, the same on every retry.
      id: newId(),
      organizationId: event.organizationId,
      endpointId: endpoint.id,
      eventId: event.id,
      eventType: event.type,
      body,
      status: "pending",
      attemptCount: 0,
      attemptsSinceQueued: 0,
      nextAttemptAt: new Date(event.occurredAt.getTime() + this.firstDelayMs),
      leaseOwner: null,
      leaseExpiresAt: null,
      createdAt: event.occurredAt,
      updatedAt: event.occurredAt,
      // An ordered endpoint's deliveries keep their reference's log order (the claim enforces it).
      orderingKey: endpoint.ordering === "reference" ? event.referenceId : null,
      eventOccurredAt: event.occurredAt,
      droppedReason: null,
    }));
  }

  private enabledEndpoints(store: Store, organizationId: string): Promise<EndpointRoute[]> {
    let byOrganization = this.endpointsByTransaction.get(store);
    if (!byOrganization) this.endpointsByTransaction.set(store, (byOrganization = new Map()));
    let endpoints = byOrganization.get(organizationId);
    if (!endpoints) {
      endpoints = store.webhooks.findEnabledEndpoints(organizationId);
      // A read started by prepare may fail (its connection broke, say) when nobody will wait for it: the change
      // failed first and recorded nothing. That failure is the transaction's, not an unhandled rejection; whoever
      // awaits the read still sees it.
      endpoints.catch(() => {});
      byOrganization.set(organizationId, endpoints);
    }
    return endpoints;
  }
}

/** Whether `event` goes to `endpoint`: both filters must pass (see the class comment). */
export function routesTo(endpoint: EndpointRoute, event: LifecycleEvent): boolean {
  return passesFilters(endpoint, event.type, () => event.referenceTags);
}

/**
 * Whether the endpoint, with its filters as they are now, still takes a delivery queued for it (SPEC §9.2: once a
 * change of its filters is acknowledged, no delivery it no longer takes starts): the same rule as `routesTo`, on
 * the delivery's event type and the tag snapshot in its body (`reference_tags`). A test event is always taken.
 */
export function takesDelivery(endpoint: EndpointRoute, delivery: Pick<WebhookDelivery, "eventType" | "body">): boolean {
  if (delivery.eventType === TEST_EVENT_TYPE) return true;
  return passesFilters(endpoint, delivery.eventType, () => {
    // Bodies are written by the outbox and the replay (webhook-body.ts): `reference_tags` is always a list.
    const body = JSON.parse(delivery.body) as { reference_tags?: readonly { id: string }[] };
    return body.reference_tags ?? [];
  });
}

function passesFilters(
  endpoint: EndpointRoute,
  eventType: string,
  referenceTags: () => readonly { readonly id: string }[],
): boolean {
  if (endpoint.eventTypes !== null && !(endpoint.eventTypes as readonly string[]).includes(eventType)) return false;
  if (endpoint.tagIds === null) return true;
  const tagIds = endpoint.tagIds;
  return referenceTags().some((tag) => tagIds.includes(tag.id));
}
