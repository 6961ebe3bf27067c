/*
 * Glossary. A *scope* names what a key may do: read or write one area of the API (SPEC §3.1). A key holds a set
 * of scopes; an operation needs at most one (src/pipeline/access/scopes.ts says which).
 */

/** Every scope, in the order SPEC §3.1 lists them. */
export const API_KEY_SCOPES = [
  "references:read",
  "references:write",
  "webhooks:read",
  "webhooks:write",
  "documents:read",
  "documents:write",
  "keys:read",
  "keys:write",
  "audit:read",
] as const;

export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];

const KNOWN = new Set<string>(API_KEY_SCOPES);

export function isApiKeyScope(value: string): value is ApiKeyScope {
  return KNOWN.has(value);
}

/**
 * The scopes stored in a key's `scopes` column (single spaces between them). An unknown word is dropped: a scope
 * removed from the list grants nothing.
 */
export function parseStoredScopes(stored: string): ReadonlySet<ApiKeyScope> {
  return new Set(stored.split(" ").filter(isApiKeyScope));
}

/** The column text of a set of scopes, in the canonical order. */
export function storedScopes(scopes: Iterable<ApiKeyScope>): string {
  const held = new Set(scopes);
  return API_KEY_SCOPES.filter((scope) => held.has(scope)).join(" ");
}

/** Scopes in the canonical order, for answers. */
export function orderedScopes(scopes: ReadonlySet<ApiKeyScope>): ApiKeyScope[] {
  return API_KEY_SCOPES.filter((scope) => scopes.has(scope));
}
