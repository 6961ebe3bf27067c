import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import type { GraphqlErrorBody } from "../graphql-client.ts";

/*
 * A GraphQL client for the documents GraphQL Code Generator's client preset generates with trusted documents
 * (mode `replaceDocumentWithHash`: a typed document holds only `__meta__.documentId`, no text). It sends each
 * operation by its id, in one of the three forms the server accepts, and keeps every request body (or URL) it sent,
 * so that a test can assert what went over the wire.
 */

export type TrustedTransport =
  /** POST `{ documentId, variables }` (GraphQL-over-HTTP, Appendix A). */
  | "documentId"
  /** POST `{ extensions: { persistedQuery: { version: 1, sha256Hash } }, variables }` (Apollo). */
  | "apollo"
  /** GET `?documentId=…&variables=…` (queries only). */
  | "get";

export interface TrustedResult<Data> {
  readonly status: number;
  readonly data?: Data | null;
  readonly errors?: readonly GraphqlErrorBody[];
}

export interface TrustedClient {
  execute<Data, Variables>(
    document: TypedDocumentNode<Data, Variables>,
    variables: Variables,
    transport?: TrustedTransport,
  ): Promise<TrustedResult<Data>>;
  /** Every request body (POST) or URL (GET) sent, in order. */
  readonly sent: string[];
}

/** The id a generated document carries instead of its text. */
export function documentIdOf(document: TypedDocumentNode<unknown, never>): string {
  const meta = (document as unknown as { __meta__?: { documentId?: unknown } }).__meta__;
  if (typeof meta?.documentId !== "string") throw new Error("not a document generated with persisted documents");
  return meta.documentId;
}

export function trustedClient(url: string, apiKey: string): TrustedClient {
  const sent: string[] = [];
  return {
    sent,
    async execute(document, variables, transport = "documentId") {
      const documentId = documentIdOf(document as TypedDocumentNode<unknown, never>);
      const headers: Record<string, string> = { "x-api-key": apiKey, accept: "application/graphql-response+json" };
      let response: Response;
      if (transport === "get") {
        const search = new URLSearchParams({ documentId, variables: JSON.stringify(variables) });
        const target = `${url}/graphql?${search.toString()}`;
        sent.push(target);
        response = await fetch(target, { headers });
      } else {
        const body = JSON.stringify(
          transport === "documentId"
            ? { documentId, variables }
            : {
                variables,
                extensions: { persistedQuery: { version: 1, sha256Hash: documentId.slice("sha256:".length) } },
              },
        );
        sent.push(body);
        response = await fetch(`${url}/graphql`, {
          method: "POST",
          headers: { ...headers, "content-type": "application/json" },
          body,
        });
      }
      const result = (await response.json()) as Omit<TrustedResult<never>, "status">;
      return { status: response.status, ...result } as TrustedResult<never>;
    },
  };
}
