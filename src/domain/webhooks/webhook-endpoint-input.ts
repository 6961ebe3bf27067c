import { isLifecycleEventType, LIFECYCLE_EVENT_TYPES, type LifecycleEventType } from "../lifecycle/lifecycle-event.ts";
import { validationFailed, type FieldIssue } from "../shared/errors.ts";
import { isUuid } from "../shared/ids.ts";
import { parseEndpointUrl, type WebhookTargetPolicy } from "./endpoint-url.ts";
import { WEBHOOK_SIGNINGS, type WebhookSigning } from "./signing-keys.ts";
import { validateDestination, type BrokerDestination } from "./webhook-destination.ts";
import { WEBHOOK_ORDERINGS, type WebhookOrdering } from "./webhook-models.ts";

/** Raw input from either surface; `validateEndpointInput` checks every field. Absent (`undefined`) means "unchanged". */
export interface WebhookEndpointInput {
  readonly url?: unknown;
  /** A broker destination instead of `url` (src/domain/webhooks/webhook-destination.ts); null: absent. */
  readonly destination?: unknown;
  /** null: every event type. */
  readonly eventTypes?: unknown;
  /** null: no tag filter (every reference); else a non-empty list of the organization's tag ids. */
  readonly tagIds?: unknown;
  /** null: no description. */
  readonly description?: unknown;
  readonly enabled?: unknown;
  /** "none" or "reference"; null or absent: unchanged ("none" on creation). */
  readonly ordering?: unknown;
  /** "hmac-sha256" or "ed25519"; null or absent: "hmac-sha256" on creation, unchanged on update. */
  readonly signing?: unknown;
  /** An integer from 1 to MAX_DELIVERIES_PER_SECOND; null: no throttle; absent: unchanged (none on creation). */
  readonly maxDeliveriesPerSecond?: unknown;
}

/** The fields of a valid input, in the domain's types; absent fields are unchanged. */
export interface EndpointChanges {
  readonly url?: string;
  /** A broker destination; null when `url` is given (the endpoint delivers over HTTP from then on). */
  readonly destination?: BrokerDestination | null;
  readonly eventTypes?: LifecycleEventType[] | null;
  readonly tagIds?: string[] | null;
  readonly description?: string | null;
  readonly enabled?: boolean;
  readonly ordering?: WebhookOrdering;
  readonly signing?: WebhookSigning;
  readonly maxDeliveriesPerSecond?: number | null;
}

export const MAX_DESCRIPTION_LENGTH = 500;
/** The highest throttle an endpoint may set (deliveries per second). */
export const MAX_DELIVERIES_PER_SECOND = 10_000;
/** The most tags one endpoint's tag filter may list. */
export const MAX_FILTER_TAGS = 100;

/**
 * Validates the fields present in `input`; every problem is reported at once. `currentDestination`: the
 * endpoint's broker destination on an update (its URL is kept when the same kind comes without one).
 * @throws VALIDATION_FAILED
 */
export async function validateEndpointInput(
  input: WebhookEndpointInput,
  targets: WebhookTargetPolicy,
  currentDestination: BrokerDestination | null = null,
): Promise<EndpointChanges> {
  const issues: FieldIssue[] = [];
  let url: string | undefined;
  let destination: BrokerDestination | null | undefined;
  const hasDestination = input.destination !== undefined && input.destination !== null;
  if (hasDestination && input.url !== undefined && input.url !== null) {
    issues.push({
      path: ["destination"],
      code: "CONFLICTING_FIELDS",
      message: "give either url (HTTP) or destination (a message broker), not both",
    });
  } else if (hasDestination) {
    const parsed = await validateDestination(input.destination, currentDestination, targets);
    if (parsed.destination) destination = parsed.destination;
    else issues.push(...parsed.issues);
  } else if (input.url !== undefined) {
    destination = null;
    const parsed = parseEndpointUrl(input.url);
    if (parsed.url) {
      const refusal = await targets.refusalReason(parsed.url);
      if (refusal)
        issues.push({ path: ["url"], code: "TARGET_NOT_ALLOWED", message: `url target is not allowed: ${refusal}` });
      else url = parsed.url.toString();
    } else {
      issues.push(...parsed.issues);
    }
  }
  let eventTypes: LifecycleEventType[] | null | undefined;
  if (input.eventTypes === null) eventTypes = null;
  else if (input.eventTypes !== undefined) {
    if (!Array.isArray(input.eventTypes) || input.eventTypes.length === 0) {
      issues.push({
        path: ["eventTypes"],
        code: "INVALID_TYPE",
        message: "{eventTypes} must be a non-empty array of event types, or null for every type",
      });
    } else {
      input.eventTypes.forEach((type: unknown, index) => {
        if (typeof type !== "string" || !isLifecycleEventType(type)) {
          issues.push({
            path: ["eventTypes", index],
            code: "INVALID_EVENT_TYPE",
            message: `unknown event type ${JSON.stringify(type)}; valid types are ${LIFECYCLE_EVENT_TYPES.join(", ")}`,
          });
        }
      });
      eventTypes = [...new Set(input.eventTypes as LifecycleEventType[])];
    }
  }
  let tagIds: string[] | null | undefined;
  if (input.tagIds === null) tagIds = null;
  else if (input.tagIds !== undefined) {
    if (!Array.isArray(input.tagIds) || input.tagIds.length === 0 || input.tagIds.length > MAX_FILTER_TAGS) {
      issues.push({
        path: ["tagIds"],
        code: "INVALID_TYPE",
        message: `tag_ids must be an array of 1 to ${MAX_FILTER_TAGS} tag ids, or null for every reference`,
      });
    } else {
      input.tagIds.forEach((id: unknown, index) => {
        if (typeof id !== "string" || !isUuid(id))
          issues.push({
            path: ["tagIds", index],
            code: "INVALID_ID",
            message: `${JSON.stringify(id)} is not a tag id`,
          });
      });
      tagIds = input.tagIds.map((id) => String(id).toLowerCase());
    }
  }
  let description: string | null | undefined;
  if (input.description === null) description = null;
  else if (input.description !== undefined) {
    if (typeof input.description !== "string" || [...input.description].length > MAX_DESCRIPTION_LENGTH) {
      issues.push({
        path: ["description"],
        code: "INVALID_LENGTH",
        message: `description must be a string of at most ${MAX_DESCRIPTION_LENGTH} characters`,
      });
    } else {
      description = input.description.trim() === "" ? null : input.description.trim();
    }
  }
  let enabled: boolean | undefined;
  if (input.enabled !== undefined && input.enabled !== null) {
    if (typeof input.enabled !== "boolean")
      issues.push({ path: ["enabled"], code: "INVALID_TYPE", message: "enabled must be a boolean" });
    else enabled = input.enabled;
  }
  let ordering: WebhookOrdering | undefined;
  if (input.ordering !== undefined && input.ordering !== null) {
    if (typeof input.ordering !== "string" || !(WEBHOOK_ORDERINGS as readonly string[]).includes(input.ordering))
      issues.push({
        path: ["ordering"],
        code: "INVALID_ENUM",
        message: `ordering must be one of ${WEBHOOK_ORDERINGS.join(", ")}`,
      });
    else ordering = input.ordering as WebhookOrdering;
  }
  let signing: WebhookSigning | undefined;
  if (input.signing !== undefined && input.signing !== null) {
    if (typeof input.signing !== "string" || !(WEBHOOK_SIGNINGS as readonly string[]).includes(input.signing))
      issues.push({
        path: ["signing"],
        code: "INVALID_ENUM",
        message: `signing must be one of ${WEBHOOK_SIGNINGS.join(", ")}`,
      });
    else signing = input.signing as WebhookSigning;
  }
  let maxDeliveriesPerSecond: number | null | undefined;
  if (input.maxDeliveriesPerSecond === null) maxDeliveriesPerSecond = null;
  else if (input.maxDeliveriesPerSecond !== undefined) {
    const max = input.maxDeliveriesPerSecond;
    if (typeof max !== "number" || !Number.isInteger(max) || max < 1 || max > MAX_DELIVERIES_PER_SECOND)
      issues.push({
        path: ["maxDeliveriesPerSecond"],
        code: "INVALID_VALUE",
        message: `max_deliveries_per_second must be an integer from 1 to ${MAX_DELIVERIES_PER_SECOND}, or null for no throttle`,
      });
    else maxDeliveriesPerSecond = max;
  }
  if (issues.length > 0) throw validationFailed(issues);
  return { url, destination, eventTypes, tagIds, description, enabled, ordering, signing, maxDeliveriesPerSecond };
}
