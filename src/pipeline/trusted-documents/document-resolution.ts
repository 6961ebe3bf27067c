import type { TrustedDocumentService } from "../../domain/documents/trusted-document-service.ts";
import { documentIdOfSha256Hash, isDocumentId } from "../../domain/documents/document-id.ts";
import type { Caller } from "../../domain/organizations/organization-service.ts";

/*
 * Trusted documents on every GraphQL transport: the core, which knows no transport. The pipeline's resolve stage
 * (src/pipeline/graphql-pipeline.ts: HTTP, graphql-ws) and SSE (through live-documents.ts) hand it what a request says
 * about its document, and run the text it returns, or answer its refusal. It never parses: what it decides needs the
 * request's fields and the registry only, and the document it returns is parsed once, by the transport's own pipeline
 * (Apollo keeps parsed documents by their text's hash, so a registered document is parsed once per instance).
 *
 * A request names its document in one of three ways:
 * - `documentId: "sha256:<hex>"` (GraphQL-over-HTTP, Appendix A): a registered document of the caller's
 *   organization, or PERSISTED_DOCUMENT_NOT_FOUND. Never with `query` or `extensions.persistedQuery`.
 * - `extensions.persistedQuery { version: 1, sha256Hash }` without `query` (Apollo's persisted queries): a
 *   registered document of the organization first; else, for an ordinary key, Apollo's automatic persisted queries
 *   (APQ: a text some request sent along with its hash earlier), else PERSISTED_QUERY_NOT_FOUND, the answer after
 *   which an Apollo client sends the text along; for a trusted-documents-only key, PERSISTED_QUERY_NOT_FOUND at once
 *   (what APQ holds is text anyone sent, not trusted).
 * - `query`: the text. An ordinary key may send any; a trusted-documents-only key only the text of a registered
 *   document, byte for byte, else TRUSTED_DOCUMENTS_ONLY.
 */

/** What a request says about its document, as sent (the transport only picks the fields). */
export interface DocumentSource {
  readonly query?: unknown;
  readonly documentId?: unknown;
  /** `extensions.persistedQuery` (Apollo). */
  readonly persistedQuery?: unknown;
}

/** A request refused before its document is parsed: the GraphQL error's code, message and HTTP status. */
export interface DocumentRefusal {
  readonly code:
    "PERSISTED_DOCUMENT_NOT_FOUND" | "PERSISTED_QUERY_NOT_FOUND" | "TRUSTED_DOCUMENTS_ONLY" | "BAD_REQUEST";
  readonly message: string;
  /** Over HTTP. PERSISTED_QUERY_NOT_FOUND is a 200, as Apollo answers it (its clients read the body). */
  readonly status: number;
}

export type DocumentResolution =
  /** Run this text: the document the request named by id (the id and any persistedQuery are consumed). */
  | { readonly kind: "registered"; readonly query: string }
  /** Go on with the request as sent: its text is allowed, or what it names is Apollo's to find (APQ). */
  | { readonly kind: "as-sent" }
  | { readonly kind: "refused"; readonly refusal: DocumentRefusal };

const AS_SENT: DocumentResolution = { kind: "as-sent" };

export const DOCUMENT_REFUSALS = {
  documentNotFound: (documentId: string): DocumentRefusal => ({
    code: "PERSISTED_DOCUMENT_NOT_FOUND",
    message: `No document is registered as ${documentId}: register it first (persisted-documents.json)`,
    status: 400,
  }),
  // Apollo's own message: Apollo's clients recognize it by message or by code.
  queryNotFound: (): DocumentRefusal => ({
    code: "PERSISTED_QUERY_NOT_FOUND",
    message: "PersistedQueryNotFound",
    status: 200,
  }),
  trustedOnly: (): DocumentRefusal => ({
    code: "TRUSTED_DOCUMENTS_ONLY",
    message:
      'This API key runs registered documents only: send the document\'s id (documentId: "sha256:<hex>" or ' +
      "extensions.persistedQuery.sha256Hash) instead of a document that is not registered",
    status: 400,
  }),
  badRequest: (message: string): DocumentRefusal => ({ code: "BAD_REQUEST", message, status: 400 }),
};

function hasText(query: unknown): query is string {
  return typeof query === "string" && query !== "";
}

/** The hash of an Apollo persisted query of version 1 sent without its text; null for anything else. */
function persistedQueryHash(persistedQuery: unknown): unknown {
  if (typeof persistedQuery !== "object" || persistedQuery === null) return null;
  const { version, sha256Hash } = persistedQuery as { version?: unknown; sha256Hash?: unknown };
  // Another version is Apollo's to refuse (400 BAD_REQUEST), with its own message.
  return version === 1 ? sha256Hash : null;
}

export class DocumentResolver {
  constructor(private readonly documents: TrustedDocumentService) {}

  /** What to run for `caller`'s request (see the top of this file). */
  async resolve(caller: Caller, source: DocumentSource): Promise<DocumentResolution> {
    const { query, documentId, persistedQuery } = source;
    if (documentId !== undefined && documentId !== null) {
      if (hasText(query) || (persistedQuery !== undefined && persistedQuery !== null))
        return refused(
          DOCUMENT_REFUSALS.badRequest("Send documentId alone: not with query nor with extensions.persistedQuery"),
        );
      if (!isDocumentId(documentId))
        return refused(DOCUMENT_REFUSALS.badRequest('documentId must be "sha256:" and 64 lower-case hex digits'));
      const text = await this.documents.findDocumentText(caller.organizationId, documentId);
      return text === null ? refused(DOCUMENT_REFUSALS.documentNotFound(documentId)) : registered(text);
    }
    if (!hasText(query)) {
      const hash = persistedQueryHash(persistedQuery);
      if (hash === null) return AS_SENT;
      const id = documentIdOfSha256Hash(hash);
      const text = id === null ? null : await this.documents.findDocumentText(caller.organizationId, id);
      if (text !== null) return registered(text);
      return caller.trustedDocumentsOnly ? refused(DOCUMENT_REFUSALS.queryNotFound()) : AS_SENT;
    }
    if (!caller.trustedDocumentsOnly) return AS_SENT;
    return (await this.documents.isRegisteredText(caller.organizationId, query))
      ? AS_SENT
      : refused(DOCUMENT_REFUSALS.trustedOnly());
  }
}

const registered = (query: string): DocumentResolution => ({ kind: "registered", query });
const refused = (refusal: DocumentRefusal): DocumentResolution => ({ kind: "refused", refusal });
