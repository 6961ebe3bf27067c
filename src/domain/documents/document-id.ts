import { createHash } from "node:crypto";

/*
 * Document ids. Glossary:
 * - document id: `sha256:` and the 64 lower-case hex digits of the SHA-256 of a document's text (UTF-8), the
 *   GraphQL-over-HTTP "SHA256 hex document identifier" (Appendix A). The id is the text's hash, so one id names one
 *   text everywhere, and a registered document is never changed.
 * - manifest key: how a manifest names a document. GraphQL Code Generator's client preset writes the bare hex digits
 *   (its default `hashAlgorithm: "sha256"`); a manifest may also use the prefixed id.
 */

export const DOCUMENT_ID_PREFIX = "sha256:";

const DOCUMENT_ID = /^sha256:[0-9a-f]{64}$/;
const BARE_SHA256 = /^[0-9a-f]{64}$/;

/** The id of a document's text. */
export function documentIdOf(text: string): string {
  return DOCUMENT_ID_PREFIX + createHash("sha256").update(text, "utf8").digest("hex");
}

/** Whether `value` is a well-formed document id (`sha256:` and 64 lower-case hex digits). */
export function isDocumentId(value: unknown): value is string {
  return typeof value === "string" && DOCUMENT_ID.test(value);
}

/** The document id a manifest key stands for (`sha256:<hex>` or the bare hex digits), or null if it is neither. */
export function documentIdOfManifestKey(key: string): string | null {
  if (isDocumentId(key)) return key;
  return BARE_SHA256.test(key) ? DOCUMENT_ID_PREFIX + key : null;
}

/** The document id of an Apollo persisted query hash (`extensions.persistedQuery.sha256Hash`: the bare hex digits). */
export function documentIdOfSha256Hash(hash: unknown): string | null {
  return typeof hash === "string" && BARE_SHA256.test(hash) ? DOCUMENT_ID_PREFIX + hash : null;
}
