import type { LifecycleEvent } from "../lifecycle/lifecycle-event.ts";
import { TEST_EVENT_TYPE } from "./webhook-models.ts";

/*
 * The JSON a receiver gets. It is built once, when the delivery is queued, and stored as text, so
 * that every retry sends the same bytes under the same signature input.
 */

export interface WebhookBody {
  /** The event's id. */
  readonly id: string;
  readonly type: string;
  readonly occurred_at: string;
  readonly reference_id: string | null;
  readonly organization_id: string;
  /** The reference's tags when the event was written. */
  readonly reference_tags: readonly { readonly id: string; readonly name: string }[];
  readonly status: "data_received" | "test";
  /** The event's `detail`, as written to the lifecycle log. */
  readonly payload: unknown;
}

export function buildEventBody(event: LifecycleEvent): string {
  const body: WebhookBody = {
    id: event.id,
    type: event.type,
    occurred_at: event.occurredAt.toISOString(),
    reference_id: event.referenceId,
    organization_id: event.organizationId,
    reference_tags: event.referenceTags.map((tag) => ({ id: tag.id, name: tag.name })),
    status: "data_received",
    payload: event.detail,
  };
  return JSON.stringify(body);
}

/** A test event: the same envelope, type `webhook_test`, no reference, and `status: "test"`. */
export function buildTestBody(eventId: string, organizationId: string, endpointId: string, at: Date): string {
  const body: WebhookBody = {
    id: eventId,
    type: TEST_EVENT_TYPE,
    occurred_at: at.toISOString(),
    reference_id: null,
    organization_id: organizationId,
    reference_tags: [],
    status: "test",
    payload: {
      organization_id: organizationId,
      webhook_endpoint_id: endpointId,
      message: "This is a test event sent from reftrail. Answer with a 2xx status to acknowledge it.",
    },
  };
  return JSON.stringify(body);
}
