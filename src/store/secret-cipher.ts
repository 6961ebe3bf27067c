import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

/*
 * Encryption at rest of webhook signing secrets (docs/decisions.md, "Secrets"). HMAC signing needs the secret
 * itself, so it cannot be hashed like an API key; it is encrypted with AES-256-GCM under a key from
 * configuration (WEBHOOK_SECRET_KEY, or the development key file) instead, so that a copy of the database alone
 * does not give the secrets away.
 *
 * Stored form, a versioned envelope: `v1:<iv>:<tag>:<ciphertext>`, each part base64url; the IV is 12 random bytes
 * per value, the tag GCM's 16-byte authentication tag. A stored value without the `v1:` prefix is plain text
 * written before encryption existed; it is read as it is (and re-encrypted when the server starts).
 */

const ENVELOPE_VERSION = "v1";
/** How every stored envelope starts; a value without it is plain text from before encryption. */
export const ENCRYPTED_PREFIX = `${ENVELOPE_VERSION}:`;
const KEY_BYTES = 32;
const IV_BYTES = 12;

export class SecretCipher {
  private resolvedKey: Buffer | undefined;

  /**
   * @param key the 32-byte key, or a function that gives it on first use (so that commands that never touch a
   *            webhook secret, such as `reftrail migrate`, never need one).
   */
  constructor(private readonly key: Buffer | (() => Buffer)) {}

  private get keyBytes(): Buffer {
    if (!this.resolvedKey) {
      const key = typeof this.key === "function" ? this.key() : this.key;
      if (key.length !== KEY_BYTES) throw new Error(`the webhook secret key must be ${KEY_BYTES} bytes`);
      this.resolvedKey = key;
    }
    return this.resolvedKey;
  }

  encrypt(plaintext: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.keyBytes, iv);
    const ciphertext = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    const parts = [iv, cipher.getAuthTag(), ciphertext].map((part) => part.toString("base64url"));
    return [ENVELOPE_VERSION, ...parts].join(":");
  }

  /** The plain text of a stored value: an envelope is decrypted, a legacy plain-text value returned as is. */
  decrypt(stored: string): string {
    if (!isEncrypted(stored)) return stored;
    const [, iv, tag, ciphertext] = stored.split(":");
    if (iv === undefined || tag === undefined || ciphertext === undefined) {
      throw new Error("malformed encrypted webhook secret");
    }
    const decipher = createDecipheriv("aes-256-gcm", this.keyBytes, Buffer.from(iv, "base64url"));
    decipher.setAuthTag(Buffer.from(tag, "base64url"));
    // final() throws when the tag does not match: a wrong key or a tampered value, never silently wrong text.
    return Buffer.concat([decipher.update(Buffer.from(ciphertext, "base64url")), decipher.final()]).toString("utf8");
  }
}

/** Whether a stored value is an envelope (as opposed to plain text from before encryption). */
export function isEncrypted(stored: string): boolean {
  return stored.startsWith(ENCRYPTED_PREFIX);
}
