import type { FieldIssue } from "../shared/errors.ts";

/*
 * Endpoint URL rules. The syntax is checked here; whether the target is a private, loopback or
 * link-local address (after DNS resolution) is asked of a `WebhookTargetPolicy`, which the worker applies
 * again at every connection (a name may resolve differently later).
 */

export const MAX_URL_LENGTH = 2_048;

/** Says why a URL's target is refused, or null when it may be called. */
export interface WebhookTargetPolicy {
  refusalReason(url: URL): Promise<string | null>;
}

/** The URL, normalized by the WHATWG parser, or the issues found with it (path `url`). */
export function parseEndpointUrl(raw: unknown): { url: URL; issues: [] } | { url: null; issues: FieldIssue[] } {
  const issue = (code: string, message: string) => ({ url: null, issues: [{ path: ["url"], code, message }] });
  if (typeof raw !== "string") return issue("INVALID_TYPE", "url must be a string");
  const text = raw.trim();
  if (text.length === 0 || text.length > MAX_URL_LENGTH)
    return issue("INVALID_LENGTH", `url must be 1 to ${MAX_URL_LENGTH} characters`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return issue("INVALID_URL", "url is not an absolute URL");
  }
  if (url.protocol !== "https:" && url.protocol !== "http:")
    return issue("INVALID_SCHEME", "url must use https or http");
  if (url.hostname === "") return issue("INVALID_URL", "url has no host");
  // Credentials in a URL end up in logs and screenshots; receivers authenticate deliveries by signature.
  if (url.username !== "" || url.password !== "")
    return issue("CREDENTIALS_NOT_ALLOWED", "url must not contain a user name or password");
  if (url.hash !== "") return issue("FRAGMENT_NOT_ALLOWED", "url must not contain a #fragment");
  return { url, issues: [] };
}
