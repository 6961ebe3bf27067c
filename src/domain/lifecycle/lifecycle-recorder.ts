import type { Clock } from "../shared/clock.ts";
import { newId } from "../shared/ids.ts";
import type { Reference, Tag } from "../models.ts";
import type { Store } from "../store.ts";
import type { LifecycleEvent, LifecycleEventBody } from "./lifecycle-event.ts";

/** Writes what must commit with an event (the webhook outbox rows), through the event's transaction. */
export interface EventOutbox {
  /** Starts the reads `enqueue` will need for events of `organizationId` in this transaction (see prepare). */
  prepare(store: Store, organizationId: string): void;
  enqueue(store: Store, event: LifecycleEvent): Promise<void>;
  /** The same for many events, in one multi-row write whatever their number (bulk ingestion). */
  enqueueAll(store: Store, events: readonly LifecycleEvent[]): Promise<void>;
}

/** One event to record with {@link LifecycleRecorder.recordAll}: its body, for a reference with its tags. */
export interface EventDraft {
  readonly reference: Reference;
  readonly tags: readonly Tag[];
  readonly body: LifecycleEventBody;
}

/**
 * Writes lifecycle events inside the caller's transaction. The transaction itself tells who listens once it has
 * committed (`Store.onEventsCommitted`): no caller has to.
 */
export class LifecycleRecorder {
  constructor(
    private readonly clock: Clock,
    private readonly outbox?: EventOutbox,
  ) {}

  /**
   * Starts, without waiting for it, what recording events of `organizationId` in this transaction will read (the
   * organization's webhook endpoints). A caller that knows it is about to record calls it with its own first
   * reads: on PostgreSQL they then leave together, one round trip instead of two.
   */
  prepare(store: Store, organizationId: string): void {
    this.outbox?.prepare(store, organizationId);
  }

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
    // Together: on PostgreSQL the insert and the outbox's read of the endpoints leave in one round trip.
    await Promise.all([store.lifecycle.insertEvent(event), this.outbox?.enqueue(store, event)]);
    return event;
  }

  /**
   * Appends many events and their outbox rows set-wise (multi-row statements whatever their number), in the
   * order given: they share one `occurredAt` and get increasing ids, so the log's `(occurred_at, id)` order is
   * the order of `drafts`. Call inside a transaction.
   */
  async recordAll(store: Store, drafts: readonly EventDraft[]): Promise<LifecycleEvent[]> {
    if (drafts.length === 0) return [];
    const occurredAt = this.clock.now();
    const events = drafts.map(
      ({ reference, tags, body }) =>
        ({
          ...body,
          id: newId(),
          organizationId: reference.organizationId,
          referenceId: reference.id,
          occurredAt,
          referenceTags: tags.map((tag) => ({ id: tag.id, name: tag.name })),
        }) as LifecycleEvent,
    );
    await Promise.all([store.lifecycle.insertEvents(events), this.outbox?.enqueueAll(store, events)]);
    return events;
  }
}
