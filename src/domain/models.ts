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
 * A reference as the REST representation its row keeps (JSON text, written by the database with the row:
 * migration 0013), with its id for the page's cursor. Listings send the texts as they are.
 */
export interface ReferenceJson {
  readonly id: string;
  readonly json: string;
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
