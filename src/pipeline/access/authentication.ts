import type { Caller, KeyRefusal } from "../../domain/organizations/organization-service.ts";
import type { Services } from "../../domain/services.ts";

/**
 * A key comes as `X-API-Key: <key>` or `Authorization: Bearer <key>` (HTTP), or as the same names in
 * graphql-ws `connectionParams`. Shared by REST, GraphQL over HTTP and subscriptions.
 */
export function presentedApiKey(headers: Record<string, unknown>): string | null {
  const direct = headers["x-api-key"] ?? headers["X-API-Key"];
  if (typeof direct === "string" && direct.trim() !== "") return direct.trim();
  const authorization = headers.authorization ?? headers.Authorization;
  if (typeof authorization === "string") {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    if (match) return match[1]!;
  }
  return null;
}

/**
 * The `WWW-Authenticate` challenge of every 401 (RFC 9110 §11.6.1), REST and GraphQL alike: Bearer is the
 * standard scheme we accept; the description mentions X-API-Key, which has no scheme of its own.
 */
export const AUTHENTICATION_CHALLENGE =
  'Bearer realm="reftrail", error_description="send the API key as Authorization: Bearer <key> or X-API-Key: <key>"';

/** The caller of a request, or why there is none, in words for the 401 (`UNAUTHENTICATED`). */
export type Authentication = { readonly caller: Caller } | { readonly caller: null; readonly message: string };

/** What a refused key is told. An expired key says so (SPEC §3.1); unknown and revoked keys are not told apart. */
export const REFUSAL_MESSAGES: Readonly<Record<KeyRefusal | "missing", string>> = {
  missing: "Send an API key in X-API-Key or Authorization: Bearer",
  invalid: "The API key is invalid or revoked",
  expired: "The API key expired",
};

export async function authenticateHeaders(
  services: Pick<Services, "organizations">,
  headers: Record<string, unknown>,
): Promise<Authentication> {
  const key = presentedApiKey(headers);
  if (key === null) return { caller: null, message: REFUSAL_MESSAGES.missing };
  const outcome = await services.organizations.authenticateOrRefuse(key);
  return typeof outcome === "string" ? { caller: null, message: REFUSAL_MESSAGES[outcome] } : { caller: outcome };
}
