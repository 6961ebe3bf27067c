import { generateKeyPairSync } from "node:crypto";
import { generateWebhookSecret } from "./webhook-secret.ts";

/*
 * How an endpoint signs its requests (SPEC §9.3, Standard Webhooks):
 * - "hmac-sha256": a shared secret, `whsec_` + base64 of 32 random bytes; signatures `v1,<base64 HMAC-SHA256>`;
 * - "ed25519": a key pair; the private key `whsk_` + base64 of its 32-byte seed stays on the server (encrypted
 *   at rest like a secret), the public key `whpk_` + base64 of its raw 32 bytes is readable through the API;
 *   signatures `v1a,<base64 ed25519 signature>`.
 * Either way, the signed content is `<webhook-id>.<webhook-timestamp>.<body>`.
 */

export const WEBHOOK_SIGNINGS = ["hmac-sha256", "ed25519"] as const;
export type WebhookSigning = (typeof WEBHOOK_SIGNINGS)[number];

export const PRIVATE_KEY_PREFIX = "whsk_";
export const PUBLIC_KEY_PREFIX = "whpk_";

/** DER prefixes that turn raw ed25519 key bytes into PKCS#8 (private seed) and SPKI (public key) documents. */
export const PKCS8_ED25519_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
export const SPKI_ED25519_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** A new signing key: `secret` signs (never shown for ed25519), `publicKey` verifies (null for HMAC). */
export interface SigningKey {
  readonly secret: string;
  readonly publicKey: string | null;
}

export function generateSigningKey(signing: WebhookSigning): SigningKey {
  if (signing === "hmac-sha256") return { secret: generateWebhookSecret(), publicKey: null };
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const seed = privateKey.export({ format: "der", type: "pkcs8" }).subarray(PKCS8_ED25519_PREFIX.length);
  const raw = publicKey.export({ format: "der", type: "spki" }).subarray(SPKI_ED25519_PREFIX.length);
  return {
    secret: `${PRIVATE_KEY_PREFIX}${seed.toString("base64")}`,
    publicKey: `${PUBLIC_KEY_PREFIX}${raw.toString("base64")}`,
  };
}

/** Whether a stored signing key is an ed25519 private key (`whsk_`), as opposed to an HMAC secret. */
export function isPrivateSigningKey(secret: string): boolean {
  return secret.startsWith(PRIVATE_KEY_PREFIX);
}
