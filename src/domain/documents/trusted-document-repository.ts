import type { TrustedDocument } from "../models.ts";

/*
 * What the registry of trusted documents needs from persistence, implemented in
 * src/store/sql/trusted-document-repository.ts. A row is written once and never changed (its id is its text's hash).
 */

/** A position in an organization's registry listing (oldest first). */
export interface TrustedDocumentPosition {
  readonly createdAt: Date;
  readonly documentId: string;
}

export interface TrustedDocumentRepository {
  /**
   * Inserts the documents the organization does not hold yet, in one statement; one already held (the same id,
   * so the same text) is left as it is, also when another transaction inserts it at the same time. Returns the
   * ids this call inserted.
   */
  insertDocumentsIfAbsent(
    organizationId: string,
    createdAt: Date,
    documents: readonly Pick<TrustedDocument, "documentId" | "document" | "operationNames">[],
  ): Promise<string[]>;
  /** How many documents the organization holds. */
  countDocuments(organizationId: string): Promise<number>;
  /** The organization's documents among `documentIds` (one statement); unknown ids are absent. */
  findDocuments(organizationId: string, documentIds: readonly string[]): Promise<TrustedDocument[]>;
  /** A page of the organization's documents by (created_at, document_id), after `after` when given. */
  listDocuments(
    organizationId: string,
    page: { readonly after?: TrustedDocumentPosition; readonly limit: number },
  ): Promise<TrustedDocument[]>;
}
