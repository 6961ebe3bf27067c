import { DEACTIVATE_REASONS, LIFECYCLE_EVENT_TYPES } from "../domain/lifecycle/lifecycle-event.ts";
import type { DeactivateReason, LifecycleEventType } from "../domain/lifecycle/lifecycle-event.ts";
import { INGESTION_MODES, type IngestionMode } from "../domain/references/ingestion-service.ts";
import type { ExtractionOutcome } from "../domain/references/extraction-outcome.ts";
import type { ListReferencesInput } from "../domain/references/reference-input.ts";
import type { WebhookSigning } from "../domain/webhooks/signing-keys.ts";
import {
  DELIVERY_STATUSES,
  DROPPED_REASONS,
  HELD_BACK_REASONS,
  TAG_FILTER_STATES,
  WEBHOOK_ORDERINGS,
  type DeliveryStatus,
  type DroppedReason,
  type HeldBackReason,
  type TagFilterState,
  type WebhookOrdering,
} from "../domain/webhooks/webhook-models.ts";
import { REPLAY_STATES, type ReplayState } from "../domain/webhooks/webhook-recovery-service.ts";

/*
 * GraphQL enums are UPPER_CASE names over the domain's own snake_case strings: resolvers receive and return
 * the domain values (codegen's `enumValues` points here), and the maps below tell graphql-js which name
 * stands for which value. The maps are derived from the domain's lists, so a value the domain adds without a
 * matching value in schema.graphql stops the server at startup (graphql-tools rejects the unknown enum value)
 * instead of failing the first response that contains it.
 */

export type { DeactivateReason, IngestionMode, LifecycleEventType };
export type ExtractionStatus = ExtractionOutcome["status"];
export type TagMatch = NonNullable<ListReferencesInput["tagMatch"]>;
export type WebhookDeliveryStatus = DeliveryStatus;
export type WebhookTagFilterState = TagFilterState;
/** What a webhook delivery carries: a lifecycle event, or the test event `sendTestWebhook` queues. */
export type WebhookEventType = LifecycleEventType | "webhook_test";
export type { WebhookOrdering, WebhookSigning };
export type WebhookHeldBackReason = HeldBackReason;
export type WebhookDroppedReason = DroppedReason;
export type WebhookReplayRunState = ReplayState;

type EnumNames<Value extends string> = { readonly [Name in Uppercase<Value>]: Extract<Value, Lowercase<Name>> };

function enumNames<Value extends string>(values: readonly Value[]): EnumNames<Value> {
  return Object.fromEntries(values.map((value) => [value.toUpperCase(), value])) as EnumNames<Value>;
}

export const DEACTIVATE_REASON_NAMES = enumNames<DeactivateReason>(DEACTIVATE_REASONS);
export const LIFECYCLE_EVENT_TYPE_NAMES = enumNames<LifecycleEventType>(LIFECYCLE_EVENT_TYPES);
export const WEBHOOK_EVENT_TYPE_NAMES = enumNames<WebhookEventType>([...LIFECYCLE_EVENT_TYPES, "webhook_test"]);
export const EXTRACTION_STATUS_NAMES = enumNames<ExtractionStatus>(["succeeded", "failed"]);
export const INGESTION_MODE_NAMES = enumNames<IngestionMode>(INGESTION_MODES);
export const TAG_MATCH_NAMES = enumNames<TagMatch>(["all", "any"]);
export const WEBHOOK_DELIVERY_STATUS_NAMES = enumNames<WebhookDeliveryStatus>(DELIVERY_STATUSES);
export const WEBHOOK_TAG_FILTER_STATE_NAMES = enumNames<WebhookTagFilterState>(TAG_FILTER_STATES);
export const WEBHOOK_ORDERING_NAMES = enumNames<WebhookOrdering>(WEBHOOK_ORDERINGS);
export const WEBHOOK_HELD_BACK_REASON_NAMES = enumNames<WebhookHeldBackReason>(HELD_BACK_REASONS);
export const WEBHOOK_DROPPED_REASON_NAMES = enumNames<WebhookDroppedReason>(DROPPED_REASONS);
/** Spelled by hand: "hmac-sha256" is no GraphQL name. */
export const WEBHOOK_SIGNING_NAMES = {
  HMAC_SHA256: "hmac-sha256",
  ED25519: "ed25519",
} as const satisfies Readonly<Record<string, WebhookSigning>>;
export const WEBHOOK_REPLAY_RUN_STATE_NAMES = enumNames<WebhookReplayRunState>(REPLAY_STATES);
