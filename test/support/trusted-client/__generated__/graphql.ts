/* eslint-disable */
/** Internal type. DO NOT USE DIRECTLY. */
type Exact<T extends { [key: string]: unknown }> = { [K in keyof T]: T[K] };
/** Internal type. DO NOT USE DIRECTLY. */
export type Incremental<T> = T | { [P in keyof T]?: P extends ' $fragmentName' | '__typename' ? T[P] : never };
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';
/**
 * What a lifecycle event records. The type decides what `detail` holds (docs/contract.md lists each type's fields;
 * `GET /v1/event-types` gives each type's JSON Schema, and each value's description here is the catalog's).
 */
export type LifecycleEventType =
  /** The estimated arrival changed. `detail`: `previous`, `current`. */
  | 'ESTIMATED_ARRIVAL_CHANGED'
  /** The estimated departure changed. `detail`: `previous`, `current`. */
  | 'ESTIMATED_DEPARTURE_CHANGED'
  /** An extraction failed. `detail`: `status`, `error { code message }`, `consecutive_failures`. */
  | 'EXTRACTION_FAILED'
  /** An extraction succeeded. `detail`: `status`. */
  | 'EXTRACTION_SUCCEEDED'
  /** The reference was created. `detail`: `identifier_type`, `identifier_value`, `carrier_scac`, `parent_reference_id`. */
  | 'REFERENCE_CREATED'
  /** The reference was deactivated. `detail`: `deactivate_reason`, `auto_unsubscribed`. */
  | 'REFERENCE_DEACTIVATED'
  /** The reference was reactivated. */
  | 'REFERENCE_REACTIVATED'
  /** An update document was recorded. `detail`: `reference_update_id`, `update`. */
  | 'REFERENCE_UPDATE_CREATED';

export type TrustedClientTagsQueryVariables = Exact<{
  first?: number | null | undefined;
}>;


export type TrustedClientTagsQuery = { tags: { edges: Array<{ node: { id: string, name: string } }> } | null };

export type TrustedClientCreateTagMutationVariables = Exact<{
  name: string;
}>;


export type TrustedClientCreateTagMutation = { createTag: { tag: { id: string, name: string } } | null };

export type TrustedClientLifecycleEventsSubscriptionVariables = Exact<{ [key: string]: never; }>;


export type TrustedClientLifecycleEventsSubscription = { lifecycleEvents: { cursor: string, node: { type: LifecycleEventType, referenceId: string } } };


export const TrustedClientTagsDocument = {"__meta__":{"documentId":"sha256:80a111a2a717c85ca29c351637c169b7317551d1e141295b6be0d16785baf670"}} as unknown as DocumentNode<TrustedClientTagsQuery, TrustedClientTagsQueryVariables>;
export const TrustedClientCreateTagDocument = {"__meta__":{"documentId":"sha256:0eda4176ca426a5ef015a52e72fa3ec4ab7726daa2f2d4164db6a39b3fdd1618"}} as unknown as DocumentNode<TrustedClientCreateTagMutation, TrustedClientCreateTagMutationVariables>;
export const TrustedClientLifecycleEventsDocument = {"__meta__":{"documentId":"sha256:8b9409c47f7566c892da9fac7718a335b14a4aec225808534552ad3071e817fd"}} as unknown as DocumentNode<TrustedClientLifecycleEventsSubscription, TrustedClientLifecycleEventsSubscriptionVariables>;