import type { LifecycleRecorder } from "../lifecycle/lifecycle-recorder.ts";
import type { Reference, ReferenceUpdate, Tag, TaggedReference } from "../models.ts";
import type { Clock } from "../shared/clock.ts";
import type { CursorCodec } from "../shared/cursor.ts";
import { notFound } from "../shared/errors.ts";
import { isUuid, newId } from "../shared/ids.ts";
import { pageOf, type Page } from "../shared/page.ts";
import type { Store } from "../store.ts";
import { parseExtractionOutcome } from "./extraction-outcome.ts";
import { isReferencePosition, type ReferencePosition } from "./reference-input.ts";
import { findReferenceIn, lockReferenceIn } from "./reference-lookup.ts";
import {
  deactivationChange,
  extractionChange,
  parseDeactivateReason,
  parseUpdateDocument,
  reactivationChange,
  updateChange,
  type TrackingChange,
} from "./tracking-rules.ts";

export interface TrackingLimits {
  readonly extractionFailureThreshold: number;
}

/**
 * What the tracking side reports about a reference once it exists: extraction outcomes, update documents,
 * deactivation and reactivation, and the stored updates read back. Each report locks the reference, applies the
 * tracking rules (tracking-rules.ts) and writes the change with its lifecycle events in one transaction.
 */
export class ReferenceTrackingService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly cursors: CursorCodec,
    private readonly recorder: LifecycleRecorder,
    private readonly limits: TrackingLimits,
  ) {}

  /**
   * Deactivates with a reason. An already deactivated reference is returned unchanged (no second event).
   * @throws NOT_FOUND, VALIDATION_FAILED (unknown reason, path `reason`).
   */
  async deactivate(organizationId: string, referenceId: string, rawReason: unknown): Promise<TaggedReference> {
    const reason = parseDeactivateReason(rawReason);
    return this.mutate(organizationId, referenceId, (store, reference, tags) =>
      this.applyChange(store, tags, deactivationChange(reference, reason, false, this.clock.now())),
    );
  }

  /** @throws NOT_FOUND, CONFLICT when the reference is active. */
  async reactivate(organizationId: string, referenceId: string): Promise<TaggedReference> {
    return this.mutate(organizationId, referenceId, (store, reference, tags) =>
      this.applyChange(store, tags, reactivationChange(reference, this.clock.now())),
    );
  }

  /**
   * Records an extraction outcome. Consecutive failures are counted; at the configured threshold an active
   * reference is deactivated by the service itself (`exceeded_extraction_attempt_threshold`, automatic).
   * @throws NOT_FOUND, VALIDATION_FAILED.
   */
  async recordExtraction(organizationId: string, referenceId: string, rawOutcome: unknown): Promise<TaggedReference> {
    // The only judge of an outcome's meaning, for both surfaces: REST's schema and GraphQL's types check shape.
    const outcome = parseExtractionOutcome(rawOutcome);
    return this.mutate(organizationId, referenceId, (store, reference, tags) =>
      this.applyChange(
        store,
        tags,
        extractionChange(reference, outcome, this.clock.now(), this.limits.extractionFailureThreshold),
      ),
    );
  }

  /**
   * Stores an update document and records `reference_update_created`, plus `estimated_*_changed` for each
   * estimate that differs from the reference's current one.
   * The document is stored as sent, so a number JSON cannot keep exactly is refused rather than altered.
   * @throws NOT_FOUND, VALIDATION_FAILED (an estimate that is not a date-time with offset, or null; a number that
   * overflows a double or an integer beyond ±(2^53−1): `INEXACT_NUMBER`).
   */
  async recordUpdate(
    organizationId: string,
    referenceId: string,
    document: Record<string, unknown>,
  ): Promise<ReferenceUpdate> {
    const estimates = parseUpdateDocument(document);
    let stored: ReferenceUpdate | undefined;
    await this.mutate(organizationId, referenceId, (store, reference, tags) => {
      const change = updateChange(reference, document, estimates, newId(), this.clock.now());
      stored = change.update;
      return this.applyChange(store, tags, change);
    });
    return stored!;
  }

  /** One stored update of the reference. @throws NOT_FOUND (also for another organization's update). */
  async getUpdate(organizationId: string, referenceId: string, updateId: string): Promise<ReferenceUpdate> {
    const [update] = isUuid(updateId)
      ? await this.store.references.findReferenceUpdatesByIds(organizationId, [updateId.toLowerCase()])
      : [];
    if (!update || update.referenceId !== referenceId.toLowerCase()) throw notFound("Reference update");
    return update;
  }

  /** Stored updates, newest first. @throws NOT_FOUND, INVALID_CURSOR. */
  async listUpdates(
    organizationId: string,
    referenceId: string,
    limit: number,
    cursor?: string,
  ): Promise<Page<ReferenceUpdate>> {
    const reference = await findReferenceIn(this.store, organizationId, referenceId);
    const filters = { scope: "updates", referenceId: reference.id };
    const after = cursor ? this.cursors.decode(cursor, filters, isReferencePosition) : undefined;
    const rows = await this.store.references.listReferenceUpdates(reference.id, after?.i, limit + 1);
    return pageOf(rows, limit, (update) => this.cursors.encode<ReferencePosition>({ i: update.id }, filters), !!after);
  }

  /**
   * Runs `change` on the reference locked for the transaction: concurrent changes of one reference (on any
   * instance) run one after another, each deciding on the row as the previous one committed it. So a state
   * change is made and logged once, and every failure gets its own count.
   */
  private async mutate(
    organizationId: string,
    referenceId: string,
    change: (store: Store, reference: Reference, tags: Tag[]) => Promise<Reference>,
  ): Promise<TaggedReference> {
    return this.store.transaction(async (store) => {
      // The endpoints the change's events will be routed to are read with the lock, in the same round trip.
      this.recorder.prepare(store, organizationId);
      // The reference, locked, and its tags (the events' snapshot).
      const { tags, ...reference } = await lockReferenceIn(store, organizationId, referenceId);
      // No change here touches tags, so the ones read are still the reference's.
      return { ...(await change(store, reference, [...tags])), tags };
    });
  }

  /**
   * Writes one change of the tracking rules: the stored update, the reference's new state and its events (with
   * their outbox rows). A change without events changed nothing and writes nothing.
   */
  private async applyChange(store: Store, tags: readonly Tag[], change: TrackingChange): Promise<Reference> {
    if (change.events.length === 0) return change.reference;
    // Issued together, none waiting for another's answer: on PostgreSQL they leave in one round trip (the
    // connection pipelines, src/store/sql/executor.ts) and still run in this order; on SQLite one after another.
    await Promise.all([
      change.update && store.references.insertReferenceUpdate(change.update),
      store.references.updateReference(change.reference),
      this.recorder.recordAll(
        store,
        change.events.map((body) => ({ reference: change.reference, tags, body })),
      ),
    ]);
    return change.reference;
  }
}
