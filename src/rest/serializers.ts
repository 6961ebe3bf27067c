import type { LifecycleEvent } from "../domain/lifecycle/lifecycle-event.ts";
import type { Reference, ReferenceUpdate, Tag } from "../domain/models.ts";

/* Domain records -> the REST shim's snake_case JSON. */

const iso = (date: Date | null) => (date ? date.toISOString() : null);

export function serializeTag(tag: Pick<Tag, "id" | "name" | "createdAt">) {
  return { id: tag.id, name: tag.name, created_at: tag.createdAt.toISOString() };
}

export function serializeTagRef(tag: Pick<Tag, "id" | "name">) {
  return { id: tag.id, name: tag.name };
}

export function serializeReference(reference: Reference, tags: readonly Tag[]) {
  return {
    id: reference.id,
    reference_id: reference.id,
    organization_id: reference.organizationId,
    container_id: reference.containerId,
    bill_of_lading: reference.billOfLading,
    booking_number: reference.bookingNumber,
    carrier_code: reference.carrierCode,
    carrier_scac: reference.carrierCode,
    parent_reference_id: reference.parentReferenceId,
    active: reference.active,
    deactivate_reason: reference.deactivateReason,
    auto_unsubscribed: reference.autoUnsubscribed,
    last_update_status: reference.lastUpdateStatus,
    consecutive_failures: reference.consecutiveFailures,
    estimated_departure: iso(reference.estimatedDeparture),
    estimated_arrival: iso(reference.estimatedArrival),
    tags: tags.map(serializeTagRef),
    created_at: reference.createdAt.toISOString(),
    updated_at: reference.updatedAt.toISOString(),
  };
}

export function serializeEvent(event: LifecycleEvent) {
  return {
    id: event.id,
    occurred_at: event.occurredAt.toISOString(),
    reference_id: event.referenceId,
    organization_id: event.organizationId,
    type: event.type,
    detail: event.detail,
  };
}

export function serializeUpdate(update: ReferenceUpdate) {
  return {
    id: update.id,
    reference_id: update.referenceId,
    organization_id: update.organizationId,
    update: update.document,
    created_at: update.createdAt.toISOString(),
  };
}
