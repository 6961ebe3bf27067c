import { GraphQLError } from "graphql";
import type { Caller } from "../../domain/organizations/organization-service.ts";
import { DOCUMENT_REFUSALS, type DocumentRefusal, type DocumentResolver } from "./document-resolution.ts";

/*
 * The subscriptions' half of trusted documents (graphql-ws and Server-Sent Events, src/live/): the same rules as
 * over HTTP (document-resolution.ts), applied to a subscribe message or an SSE request before its document is
 * prepared. A subscription may name a registered document by `documentId` (beside `query`, which graphql-ws and
 * graphql-sse require as a string: send it empty) or by `extensions.persistedQuery.sha256Hash`. These transports
 * keep no automatic persisted queries: a hash that names no registered document is PERSISTED_QUERY_NOT_FOUND for
 * every key.
 */

/** What a subscribe message or an SSE request carries about its document. */
export interface LiveDocumentSource {
  readonly query?: unknown;
  readonly documentId?: unknown;
  readonly extensions?: unknown;
}

function persistedQueryOf(extensions: unknown): unknown {
  return typeof extensions === "object" && extensions !== null
    ? (extensions as { persistedQuery?: unknown }).persistedQuery
    : undefined;
}

export class LiveDocuments {
  constructor(private readonly resolver: DocumentResolver) {}

  /** The text the subscription runs, or its refusal (a GraphQL error with its code). */
  async documentOf(caller: Caller, source: LiveDocumentSource): Promise<string | GraphQLError> {
    const persistedQuery = persistedQueryOf(source.extensions);
    const resolution = await this.resolver.resolve(caller, {
      query: source.query,
      documentId: source.documentId,
      persistedQuery,
    });
    if (resolution.kind === "refused") return refusalError(resolution.refusal);
    if (resolution.kind === "registered") return resolution.query;
    const text = typeof source.query === "string" ? source.query : "";
    if (text === "" && persistedQuery !== undefined && persistedQuery !== null)
      return refusalError(DOCUMENT_REFUSALS.queryNotFound());
    return text;
  }
}

function refusalError(refusal: DocumentRefusal): GraphQLError {
  return new GraphQLError(refusal.message, { extensions: { code: refusal.code } });
}
