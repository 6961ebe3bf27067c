import { HeaderMap } from "@apollo/server";
import type { FastifyRequest } from "fastify";
import { GraphQLError } from "graphql";
import type { Caller } from "../domain/organizations/organization-service.ts";
import type { DocumentRefusal, DocumentResolver } from "../pipeline/trusted-documents/document-resolution.ts";

declare module "fastify" {
  interface FastifyRequest {
    /** Set when the request's document is refused before it is parsed (trusted documents): the context throws it. */
    graphqlDocumentRefusal?: DocumentRefusal;
    /**
     * Set when the route could not authenticate the request or read the registry for it (an outage): the context
     * throws it, so that the request is answered 503 like any outage and never runs undecided.
     */
    graphqlRouteFailure?: unknown;
    /**
     * A GET request's search string as Apollo is to read it, when it differs from the URL's: the request named a
     * registered document by id, and the parameters now carry its text.
     */
    graphqlSearch?: string;
  }
}

/*
 * The HTTP half of trusted documents (document-resolution.ts tells the rules): runs on the GraphQL route once the
 * caller is authenticated, before the read cache and Apollo. A request that named a registered document by id is
 * rewritten into the plain request carrying its text (`query`), which the read cache and Apollo then take like any
 * other: the id costs one lookup in the registry (answered from memory once found), and the document is parsed by
 * Apollo, once per text. A refused request keeps its refusal for the context to throw, so that Apollo answers it
 * as every GraphQL error (media type, masking).
 */

type Parameters = Record<string, unknown>;

function isObject(value: unknown): value is Parameters {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A GET request's `extensions` parameter, when it is a JSON object (anything else is Apollo's to refuse). */
function parsedExtensions(text: unknown): Parameters | undefined {
  if (typeof text !== "string") return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return isObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** `extensions` without `persistedQuery` (consumed by the resolution), or undefined when nothing else is left. */
function withoutPersistedQuery(extensions: Parameters | undefined): Parameters | undefined {
  if (!extensions) return undefined;
  const { persistedQuery: _consumed, ...rest } = extensions;
  return Object.keys(rest).length > 0 ? rest : undefined;
}

export class TrustedDocumentsHttp {
  constructor(private readonly resolver: DocumentResolver) {}

  /** Resolves the document of `caller`'s request, rewriting or marking the request (see the top). */
  async apply(request: FastifyRequest, caller: Caller): Promise<void> {
    const get = request.method === "GET";
    const parameters = get ? request.query : request.body;
    // A body that is not one operation (a batch, nothing) is Apollo's to refuse.
    if (!isObject(parameters)) return;
    const extensions = get ? parsedExtensions(parameters.extensions) : parameters.extensions;
    const resolution = await this.resolver.resolve(caller, {
      query: parameters.query,
      documentId: parameters.documentId,
      persistedQuery: isObject(extensions) ? extensions.persistedQuery : undefined,
    });
    if (resolution.kind === "as-sent") return;
    if (resolution.kind === "refused") {
      request.graphqlDocumentRefusal = resolution.refusal;
      return;
    }
    const { documentId: _named, query: _absent, extensions: _sent, ...rest } = parameters;
    const remaining = withoutPersistedQuery(isObject(extensions) ? extensions : undefined);
    if (!get) {
      request.body = { ...rest, query: resolution.query, ...(remaining && { extensions: remaining }) };
      return;
    }
    // Repeated parameters stay repeated, for Apollo to refuse as it would have.
    const rewritten: Parameters = { ...rest, query: resolution.query };
    if (remaining) rewritten.extensions = JSON.stringify(remaining);
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(rewritten))
      for (const each of [value].flat()) if (typeof each === "string") search.append(name, each);
    request.query = rewritten;
    request.graphqlSearch = `?${search.toString()}`;
  }
}

/** A refusal as the GraphQL error Apollo answers (its status through `extensions.http`, never stored by caches). */
export function documentRefusalError(refusal: DocumentRefusal): GraphQLError {
  return new GraphQLError(refusal.message, {
    extensions: {
      code: refusal.code,
      http: { status: refusal.status, headers: new HeaderMap([["cache-control", "no-store"]]) },
    },
  });
}
