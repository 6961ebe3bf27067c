/** The domain's records, as services return them to the adapters. */

export interface Organization {
  readonly id: string;
  readonly name: string;
  readonly createdAt: Date;
}

export interface Tag {
  readonly id: string;
  readonly organizationId: string;
  readonly name: string;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

export interface Reference {
  readonly id: string;
  readonly organizationId: string;
  readonly containerId: string | null;
  readonly billOfLading: string | null;
  readonly bookingNumber: string | null;
  readonly carrierCode: string;
  readonly parentReferenceId: string | null;
  readonly active: boolean;
  readonly deactivateReason: string | null;
  readonly autoUnsubscribed: boolean;
  readonly lastUpdateStatus: string | null;
  readonly consecutiveFailures: number;
  readonly estimatedDeparture: Date | null;
  readonly estimatedArrival: Date | null;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/**
 * A page of references as the REST representations their rows keep (JSON text, written by the database with
 * each row: migration 0013), joined with commas in page order: `[` + `json` + `]` is the page's array.
 */
export interface ReferenceJsonPage {
  /** The joined texts, as UTF-8. Empty for an empty page. */
  readonly json: Buffer;
  /** The id of the page's last reference (the next page's position), or null for an empty page. */
  readonly lastId: string | null;
  /** Whether references follow the page. */
  readonly more: boolean;
}

/** A reference with its tags (name order), read together in one statement. */
export interface TaggedReference extends Reference {
  readonly tags: readonly Tag[];
}

export interface ReferenceUpdate {
  readonly id: string;
  readonly organizationId: string;
  readonly referenceId: string;
  readonly document: Record<string, unknown>;
  readonly createdAt: Date;
}

/** A GraphQL document an organization registered (src/domain/documents/): never changed once written. */
export interface TrustedDocument {
  /** `sha256:<hex>`: the SHA-256 of `document` (GraphQL-over-HTTP Appendix A). */
  readonly documentId: string;
  readonly organizationId: string;
  /** The document's text, exactly as registered. */
  readonly document: string;
  /** The names of its operations, in document order; null for an anonymous operation. */
  readonly operationNames: readonly (string | null)[];
  readonly createdAt: Date;
}
