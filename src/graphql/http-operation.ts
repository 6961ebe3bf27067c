import { HeaderMap, type HTTPGraphQLRequest } from "@apollo/server";
import type { FastifyRequest } from "fastify";
import type { OperationSource } from "../pipeline/operation-request.ts";
import { isJsonObject } from "../domain/shared/json-input.ts";

/*
 * GraphQL over HTTP as the pipeline sees it: what a GET or POST request says about its operation (its source),
 * the read cache's spelling of it, and the request Apollo is given once the pipeline has resolved the document (a
 * request that named a registered document by id then carries its text, as if sent with it).
 */

type Parameters = Record<string, unknown>;

/** A GET request's `extensions` parameter, when it is a JSON object (anything else is Apollo's to refuse). */
function parsedExtensions(text: unknown): Parameters | undefined {
  if (typeof text !== "string") return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return isJsonObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The parameters of the request (GET: its query string; POST: its body), when they are one operation. */
function parametersOf(request: FastifyRequest): Parameters | null {
  const parameters = request.method === "GET" ? request.query : request.body;
  return isJsonObject(parameters) ? parameters : null;
}

/** What the request says about its operation; a body that is not one operation (a batch) says nothing. */
export function operationSourceOf(request: FastifyRequest): OperationSource {
  const parameters = parametersOf(request);
  if (!parameters) return {};
  if (request.method !== "GET") return parameters;
  // Extensions that are not a JSON object stay as sent: Apollo refuses them.
  const extensions = parameters.extensions;
  return {
    ...parameters,
    extensions: extensions === undefined ? undefined : (parsedExtensions(extensions) ?? extensions),
  };
}

/**
 * What identifies an answer within the caller's organization and read version: the method, the Accept header (it
 * picks the answer's media type), and the operation as sent (text, operation name, variables). A request with
 * `extensions` (automatic persisted queries) is not cached: its text may be absent. Null: not cacheable.
 */
export function readCacheKeyOf(request: FastifyRequest, source: OperationSource): string | null {
  const { query, operationName, variables, extensions } = source;
  if (typeof query !== "string" || extensions !== undefined) return null;
  // A malformed operation name is Apollo's to refuse (400): it must not share the key of a request without one.
  if (operationName !== undefined && operationName !== null && typeof operationName !== "string") return null;
  // GET carries variables as JSON text already; POST as a value, which may be too deep to serialize here: such
  // a request is refused by the variables guard anyway, so it is simply not cached.
  let variablesText: string;
  try {
    variablesText = typeof variables === "string" ? variables : JSON.stringify(variables ?? null);
  } catch {
    return null;
  }
  const name = typeof operationName === "string" ? operationName : null;
  // As JSON, so that no two requests can spell the same key.
  return `graphql ${JSON.stringify([request.method, request.headers.accept ?? null, name, variablesText, query])}`;
}

function headerMapOf(headers: FastifyRequest["headers"]): HeaderMap {
  const map = new HeaderMap();
  for (const [name, value] of Object.entries(headers)) {
    if (value) map.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  return map;
}

/**
 * The request Apollo runs: as sent, or, when the pipeline resolved a registered document (`resolved`), with the
 * source it resolved to (its text instead of the id).
 */
export function apolloRequestOf(
  request: FastifyRequest,
  source: OperationSource,
  resolved: boolean,
): HTTPGraphQLRequest {
  const method = request.method.toUpperCase();
  const headers = headerMapOf(request.headers);
  if (!resolved)
    return { method, headers, search: new URL(request.url, "http://localhost/").search, body: request.body };
  if (method !== "GET") return { method, headers, search: "", body: source };
  // Repeated parameters stay repeated, for Apollo to refuse as it would have.
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(source)) {
    const text = name === "extensions" && isJsonObject(value) ? JSON.stringify(value) : value;
    for (const each of [text].flat()) if (typeof each === "string") search.append(name, each);
  }
  return { method, headers, search: `?${search.toString()}`, body: undefined };
}
