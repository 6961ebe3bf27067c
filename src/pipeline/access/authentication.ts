import type { Caller } from "../../domain/organizations/organization-service.ts";
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

export async function authenticateHeaders(
  services: Pick<Services, "organizations">,
  headers: Record<string, unknown>,
): Promise<Caller | null> {
  const key = presentedApiKey(headers);
  return key ? services.organizations.authenticate(key) : null;
}
