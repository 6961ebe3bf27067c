import { changedFields, type FieldChange } from "../audit/audit-event.ts";
import { maskedBrokerUrl, maskedDestination } from "./webhook-destination.ts";
import type { WebhookEndpoint } from "./webhook-models.ts";

/*
 * What the audit log records of a webhook endpoint (SPEC §3.1): its settings with every URL masked (a password or
 * a token in a URL becomes `****`), never its secret, signing keys or previous secrets.
 */

/** The endpoint's settings as the audit log shows them. */
export function auditedEndpoint(endpoint: WebhookEndpoint): Record<string, unknown> {
  return {
    url: endpoint.url === null ? null : maskedBrokerUrl(endpoint.url),
    destination: endpoint.destination && maskedDestination(endpoint.destination),
    event_types: endpoint.eventTypes,
    tag_ids: endpoint.tagIds,
    description: endpoint.description,
    enabled: endpoint.enabled,
    ordering: endpoint.ordering,
    signing: endpoint.signing,
    max_deliveries_per_second: endpoint.maxDeliveriesPerSecond,
  };
}

/** The endpoint's audited settings that differ between two versions, from -> to. */
export function endpointChanges(
  before: WebhookEndpoint | null,
  after: WebhookEndpoint | null,
): Record<string, FieldChange> {
  return changedFields(before ? auditedEndpoint(before) : {}, after ? auditedEndpoint(after) : {});
}
