import { createHmac } from "node:crypto";
import { secretKey } from "../domain/webhooks/webhook-secret.ts";

/**
 * The `webhook-signature` header of Standard Webhooks: for each secret, `v1,` + base64 HMAC-SHA256 of
 * `<webhook-id>.<webhook-timestamp>.<body>` keyed with the secret's bytes; several signatures are separated by
 * spaces (during a rotation the new and the previous secret both sign).
 */
export function signWebhook(
  secrets: readonly string[],
  webhookId: string,
  timestampSeconds: number,
  body: string,
): string {
  return secrets
    .map(
      (secret) =>
        `v1,${createHmac("sha256", secretKey(secret)).update(`${webhookId}.${timestampSeconds}.${body}`).digest("base64")}`,
    )
    .join(" ");
}
