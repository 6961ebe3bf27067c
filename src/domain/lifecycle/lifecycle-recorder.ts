import type { Clock } from "../shared/clock.ts";
import { newId } from "../shared/ids.ts";
import type { Reference, Tag } from "../models.ts";
import type { Store } from "../store.ts";
import type { LifecycleEvent, LifecycleEventBody } from "./lifecycle-event.ts";

export type CommittedEventsListener = (events: readonly LifecycleEvent[]) => void;

/** Writes what must commit with an event (the webhook outbox rows), through the event's transaction. */
export interface EventOutbox {
  enqueue(store: Store, event: LifecycleEvent): Promise<void>;
}

/**
 * Writes lifecycle events inside the caller's transaction and, once that transaction has committed, tells the
 * listeners (live subscriptions, the webhook worker's wake-up). Listeners are hints only: the log in the
 * database is the source of truth, so a listener that misses a call loses nothing.
 */
export class LifecycleRecorder {
  private readonly listeners = new Set<CommittedEventsListener>();

  constructor(
    private readonly clock: Clock,
    private readonly outbox?: EventOutbox,
  ) {}

  /**
   * Appends one event for `reference` with a snapshot of its current `tags`, and its outbox rows. Call inside a
   * transaction.
   */
  async record(
    store: Store,
    reference: Reference,
    tags: readonly Tag[],
    body: LifecycleEventBody,
  ): Promise<LifecycleEvent> {
    const event = {
      ...body,
      id: newId(),
      organizationId: reference.organizationId,
      referenceId: reference.id,
      occurredAt: this.clock.now(),
      referenceTags: tags.map((tag) => ({ id: tag.id, name: tag.name })),
    } as LifecycleEvent;
    await store.insertEvent(event);
    await this.outbox?.enqueue(store, event);
    return event;
  }

  /** Call after the transaction that recorded `events` committed. */
  committed(events: readonly LifecycleEvent[]): void {
    if (events.length === 0) return;
    for (const listener of this.listeners) listener(events);
  }

  onCommitted(listener: CommittedEventsListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
