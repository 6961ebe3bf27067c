/**
 * The lifecycle log's vocabulary. An event is one discriminated union: the type decides the shape of
 * `detail`. Every detail also carries `reference_id` and `organization_id`, so a webhook payload or a log
 * line is self-describing. Detail keys are snake_case on every surface: they are data, not API fields.
 */

export const DEACTIVATE_REASONS = [
  "customer_unsubscribed",
  "carrier_not_found",
  "data_not_found",
  "container_removed_from_bol",
  "exceeded_extraction_attempt_threshold",
  "inferred_shipment_completion",
  "newer_data_found_on_another_carrier",
] as const;
export type DeactivateReason = (typeof DEACTIVATE_REASONS)[number];

export type IdentifierType = "container" | "bill_of_lading" | "booking_number";

interface DetailBase {
  readonly reference_id: string;
  readonly organization_id: string;
}

export type LifecycleEventBody =
  | {
      readonly type: "reference_created";
      readonly detail: DetailBase & {
        readonly identifier_type: IdentifierType;
        readonly identifier_value: string;
        readonly carrier_scac: string;
        readonly parent_reference_id: string | null;
      };
    }
  | {
      readonly type: "reference_deactivated";
      readonly detail: DetailBase & {
        readonly deactivate_reason: DeactivateReason;
        readonly auto_unsubscribed: boolean;
      };
    }
  | { readonly type: "reference_reactivated"; readonly detail: DetailBase }
  | {
      readonly type: "reference_update_created";
      readonly detail: DetailBase & { readonly reference_update_id: string; readonly update: unknown };
    }
  | { readonly type: "extraction_succeeded"; readonly detail: DetailBase & { readonly status: "succeeded" } }
  | {
      readonly type: "extraction_failed";
      readonly detail: DetailBase & {
        readonly status: "failed";
        readonly error: { readonly code: string; readonly message: string };
        readonly consecutive_failures: number;
      };
    }
  | {
      readonly type: "estimated_departure_changed" | "estimated_arrival_changed";
      readonly detail: DetailBase & { readonly previous: string | null; readonly current: string | null };
    };

export type LifecycleEventType = LifecycleEventBody["type"];

export const LIFECYCLE_EVENT_TYPES: readonly LifecycleEventType[] = [
  "reference_created",
  "reference_deactivated",
  "reference_reactivated",
  "reference_update_created",
  "extraction_succeeded",
  "extraction_failed",
  "estimated_departure_changed",
  "estimated_arrival_changed",
];

export interface TagSnapshot {
  readonly id: string;
  readonly name: string;
}

/**
 * The `referenceTags` of an event read without its tag snapshot (`EventListQuery.withoutTagSnapshots`): a read
 * that knows nobody will look at them (a GraphQL selection without `referenceTags`) leaves the column unread. Told
 * apart by identity, so that a reader that does look at them can refuse it as the bug it would be.
 */
export const TAG_SNAPSHOTS_NOT_READ: readonly TagSnapshot[] = Object.freeze([]);

/** A committed log entry. `referenceTags` are the reference's tags when the event was written. */
export type LifecycleEvent = LifecycleEventBody & {
  readonly id: string;
  readonly organizationId: string;
  readonly referenceId: string;
  readonly occurredAt: Date;
  readonly referenceTags: readonly TagSnapshot[];
};

export function isLifecycleEventType(value: string): value is LifecycleEventType {
  return (LIFECYCLE_EVENT_TYPES as readonly string[]).includes(value);
}
