import { DEACTIVATE_REASONS, type DeactivateReason, type LifecycleEventBody } from "../lifecycle/lifecycle-event.ts";
import type { Reference, ReferenceUpdate } from "../models.ts";
import { parseDateTime } from "../shared/date-time.ts";
import { DomainError, validationFailed, type FieldIssue } from "../shared/errors.ts";
import { findInexactNumbers } from "../shared/exact-json.ts";
import type { ExtractionOutcome } from "./extraction-outcome.ts";

/*
 * What each report of the tracking side does to a reference, as pure functions of the reference's
 * current state: the single-item operations of ReferenceService and bulk ingestion (IngestionService) apply the
 * same rules, and only differ in how they read and write. Validators take raw input from either surface and
 * throw VALIDATION_FAILED with paths relative to the report (`["reason"]`, `["estimated_arrival"]`).
 */

/** A reference after one report, and the events the report writes, in log order. No events: nothing changed. */
export interface TrackingChange {
  readonly reference: Reference;
  readonly events: readonly LifecycleEventBody[];
  /** For an update document: the update to store. */
  readonly update?: ReferenceUpdate;
}

/** An estimated time an update document sets; `null` clears it. */
export interface EstimateChange {
  readonly key: "estimated_departure" | "estimated_arrival";
  readonly value: Date | null;
}

/** @throws VALIDATION_FAILED (path `reason`) unless `reason` is one of `DEACTIVATE_REASONS`. */
export function parseDeactivateReason(reason: unknown): DeactivateReason {
  if (typeof reason !== "string" || !(DEACTIVATE_REASONS as readonly string[]).includes(reason)) {
    throw validationFailed([
      { path: ["reason"], code: "INVALID_ENUM", message: `reason must be one of ${DEACTIVATE_REASONS.join(", ")}` },
    ]);
  }
  return reason as DeactivateReason;
}

/**
 * Checks an update document before it is stored as sent, and returns the estimated times it sets
 * (`estimated_departure`, `estimated_arrival`: a date-time with an offset, or null).
 * @throws VALIDATION_FAILED listing each bad estimate and each number JSON cannot keep exactly
 * (`INEXACT_NUMBER`: shared/exact-json.ts), with paths relative to the document.
 */
export function parseUpdateDocument(document: Readonly<Record<string, unknown>>): EstimateChange[] {
  const estimates: EstimateChange[] = [];
  const issues: FieldIssue[] = [];
  for (const key of ["estimated_departure", "estimated_arrival"] as const) {
    const raw = document[key];
    if (raw === undefined) continue;
    if (raw === null) {
      estimates.push({ key, value: null });
      continue;
    }
    const date = parseDateTime(raw);
    if (!date)
      issues.push({
        path: [key],
        code: "INVALID_DATE_TIME",
        message: `${key} must be an ISO 8601 date-time with an offset, or null`,
      });
    else estimates.push({ key, value: date });
  }
  issues.push(...findInexactNumbers(document));
  if (issues.length > 0) throw validationFailed(issues);
  return estimates;
}

/**
 * An extraction outcome. Consecutive failures are counted; at `failureThreshold` an active reference is
 * deactivated by the service itself (`exceeded_extraction_attempt_threshold`, automatic), in the same change.
 */
export function extractionChange(
  reference: Reference,
  outcome: ExtractionOutcome,
  now: Date,
  failureThreshold: number,
): TrackingChange {
  if (outcome.status === "succeeded") {
    const updated: Reference = { ...reference, consecutiveFailures: 0, lastUpdateStatus: "succeeded", updatedAt: now };
    return {
      reference: updated,
      events: [{ type: "extraction_succeeded", detail: { ...detailBase(updated), status: "succeeded" } }],
    };
  }
  const failures = reference.consecutiveFailures + 1;
  const failed: Reference = { ...reference, consecutiveFailures: failures, lastUpdateStatus: "failed", updatedAt: now };
  const events: LifecycleEventBody[] = [
    {
      type: "extraction_failed",
      detail: {
        ...detailBase(failed),
        status: "failed",
        error: { code: outcome.error.code, message: outcome.error.message },
        consecutive_failures: failures,
      },
    },
  ];
  if (!failed.active || failures < failureThreshold) return { reference: failed, events };
  const deactivated = deactivationChange(failed, "exceeded_extraction_attempt_threshold", true, now);
  return { reference: deactivated.reference, events: [...events, ...deactivated.events] };
}

/**
 * A stored update document: `reference_update_created` first (it is the cause of what follows), then
 * `estimated_*_changed` for each estimate that differs from the reference's current one.
 */
export function updateChange(
  reference: Reference,
  document: Record<string, unknown>,
  estimates: readonly EstimateChange[],
  updateId: string,
  now: Date,
): TrackingChange {
  const update: ReferenceUpdate = {
    id: updateId,
    organizationId: reference.organizationId,
    referenceId: reference.id,
    document,
    createdAt: now,
  };
  const events: LifecycleEventBody[] = [
    {
      type: "reference_update_created",
      detail: { ...detailBase(reference), reference_update_id: update.id, update: document },
    },
  ];
  let updated: Reference = { ...reference, updatedAt: now };
  for (const { key, value } of estimates) {
    const field = key === "estimated_departure" ? "estimatedDeparture" : "estimatedArrival";
    const previous = reference[field];
    if ((previous?.getTime() ?? null) === (value?.getTime() ?? null)) continue;
    updated = { ...updated, [field]: value };
    events.push({
      type: key === "estimated_departure" ? "estimated_departure_changed" : "estimated_arrival_changed",
      detail: {
        ...detailBase(updated),
        previous: previous?.toISOString() ?? null,
        current: value?.toISOString() ?? null,
      },
    });
  }
  return { reference: updated, events, update };
}

/** Deactivation with a reason. A deactivated reference stays as it is: no change, no second event. */
export function deactivationChange(
  reference: Reference,
  reason: DeactivateReason,
  automatic: boolean,
  now: Date,
): TrackingChange {
  if (!reference.active) return { reference, events: [] };
  const updated: Reference = {
    ...reference,
    active: false,
    deactivateReason: reason,
    autoUnsubscribed: automatic,
    updatedAt: now,
  };
  return {
    reference: updated,
    events: [
      {
        type: "reference_deactivated",
        detail: { ...detailBase(updated), deactivate_reason: reason, auto_unsubscribed: automatic },
      },
    ],
  };
}

/** Reactivation, which starts the failure count afresh. @throws CONFLICT when the reference is active. */
export function reactivationChange(reference: Reference, now: Date): TrackingChange {
  if (reference.active)
    throw new DomainError("CONFLICT", "The reference is active; only a deactivated one can be reactivated");
  const updated: Reference = {
    ...reference,
    active: true,
    deactivateReason: null,
    autoUnsubscribed: false,
    consecutiveFailures: 0,
    updatedAt: now,
  };
  return { reference: updated, events: [{ type: "reference_reactivated", detail: detailBase(updated) }] };
}

export function detailBase(reference: Reference): { reference_id: string; organization_id: string } {
  return { reference_id: reference.id, organization_id: reference.organizationId };
}

/** A reference as it starts: active, no failures, no estimates. */
export function newReference(
  id: string,
  organizationId: string,
  identity: Pick<Reference, "containerId" | "billOfLading" | "bookingNumber" | "carrierCode"> &
    Partial<Pick<Reference, "parentReferenceId">>,
  now: Date,
): Reference {
  return {
    id,
    organizationId,
    parentReferenceId: null,
    ...identity,
    active: true,
    deactivateReason: null,
    autoUnsubscribed: false,
    lastUpdateStatus: null,
    consecutiveFailures: 0,
    estimatedDeparture: null,
    estimatedArrival: null,
    createdAt: now,
    updatedAt: now,
  };
}

/** The `reference_created` event of a new reference (a child container's included). */
export function referenceCreatedBody(reference: Reference): LifecycleEventBody {
  const [identifierType, identifierValue] =
    reference.containerId !== null
      ? (["container", reference.containerId] as const)
      : reference.billOfLading !== null
        ? (["bill_of_lading", reference.billOfLading] as const)
        : (["booking_number", reference.bookingNumber!] as const);
  return {
    type: "reference_created",
    detail: {
      ...detailBase(reference),
      identifier_type: identifierType,
      identifier_value: identifierValue,
      carrier_scac: reference.carrierCode,
      parent_reference_id: reference.parentReferenceId,
    },
  };
}
