import { createHmac, createPrivateKey, createSecretKey, sign, type KeyObject } from "node:crypto";
import { isPrivateSigningKey, PKCS8_ED25519_PREFIX, PRIVATE_KEY_PREFIX } from "../domain/webhooks/signing-keys.ts";
import { secretKey } from "../domain/webhooks/webhook-secret.ts";

/**
 * Key objects by secret (HMAC) or private key (ed25519). Decoding the base64 and importing the key on every
 * request was a measurable part of a delivery's CPU; an endpoint signs with the same one or two keys for days.
 * Bounded: emptied when full (keys rotate rarely, so a refill costs one import per endpoint).
 */
const keys = new Map<string, KeyObject>();
const MAX_KEYS = 10_000;

function keyOf(secret: string): KeyObject {
  let key = keys.get(secret);
  if (!key) {
    if (keys.size >= MAX_KEYS) keys.clear();
    key = isPrivateSigningKey(secret)
      ? createPrivateKey({
          key: Buffer.concat([PKCS8_ED25519_PREFIX, Buffer.from(secret.slice(PRIVATE_KEY_PREFIX.length), "base64")]),
          format: "der",
          type: "pkcs8",
        })
      : createSecretKey(secretKey(secret));
    keys.set(secret, key);
  }
  return key;
}

/**
 * The `webhook-signature` header of Standard Webhooks, one signature per key, separated by spaces (during a
 * rotation the new and the previous keys all sign), each over `<webhook-id>.<webhook-timestamp>.<body>`:
 * `v1,` + base64 HMAC-SHA256 keyed with a `whsec_` secret's bytes, or `v1a,` + base64 ed25519 signature made
 * with a `whsk_` private key.
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
    const signature = isPrivateSigningKey(secret)
      ? `v1a,${sign(null, Buffer.from(signed), keyOf(secret)).toString("base64")}`
      : `v1,${createHmac("sha256", keyOf(secret)).update(signed).digest("base64")}`;
    header = header === "" ? signature : `${header} ${signature}`;
  }
  return header;
}
