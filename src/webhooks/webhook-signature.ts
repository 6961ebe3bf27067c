import { createHmac, createSecretKey, type KeyObject } from "node:crypto";
import { secretKey } from "../domain/webhooks/webhook-secret.ts";

/**
 * HMAC keys by secret. Decoding the secret's base64 and importing the key on every request was a measurable part
 * of a delivery's CPU; an endpoint signs with the same one or two secrets for days. Bounded: emptied when full
 * (secrets rotate rarely, so a refill costs one import per endpoint).
 */
const keys = new Map<string, KeyObject>();
const MAX_KEYS = 10_000;

function hmacKey(secret: string): KeyObject {
  let key = keys.get(secret);
  if (!key) {
    if (keys.size >= MAX_KEYS) keys.clear();
    key = createSecretKey(secretKey(secret));
    keys.set(secret, key);
  }
  return key;
}

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
  const signed = `${webhookId}.${timestampSeconds}.${body}`;
  let header = "";
  for (const secret of secrets) {
    const signature = createHmac("sha256", hmacKey(secret)).update(signed).digest("base64");
    header = header === "" ? `v1,${signature}` : `${header} v1,${signature}`;
  }
  return header;
}
