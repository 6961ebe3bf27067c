import { createHash } from "node:crypto";
import { LRUCache } from "lru-cache";
import type { Caller } from "../../domain/organizations/organization-service.ts";
import { DOCUMENT_REFUSALS, type DocumentRefusal } from "./document-resolution.ts";

/*
 * Automatic persisted queries (Apollo's APQ protocol: `extensions.persistedQuery { version: 1, sha256Hash }`),
 * kept per organization. A client sends a document's hash alone; the server answers PERSISTED_QUERY_NOT_FOUND
 * until some request of the same organization has sent the text along with its hash. Apollo Server keeps one
 * store for the whole server, so one organization could learn whether another had sent a given document (the
 * answer to a hash alone told it): here the key is the organization and the hash, and Apollo's own store is off.
 * Registered documents (trusted documents) are found first, by the resolver (document-resolution.ts); what is
 * kept here is text anyone of the organization sent, never trusted.
 *
 * Written here rather than taken from Apollo: Apollo's store has no per-request key (its cache is keyed by the
 * hash alone), and the protocol is three checks and a bounded map.
 */

/** Bytes of text kept for every organization together (the least recently used go first). */
const MAX_BYTES = 16 * 1024 * 1024;

export type PersistedQueryResolution =
  /** No persisted query in the request: go on with it as sent. */
  | { readonly kind: "none" }
  /** Run this text (found by its hash, or sent with it and now kept); the persisted query is consumed. */
  | { readonly kind: "text"; readonly query: string }
  | { readonly kind: "refused"; readonly refusal: DocumentRefusal };

export class AutomaticPersistedQueries {
  private readonly texts = new LRUCache<string, string>({
    maxSize: MAX_BYTES,
    sizeCalculation: (text, key) => text.length + key.length,
  });

  /** What a request's `persistedQuery` (and its text, if sent) means for `caller`'s organization. */
  resolve(caller: Caller, query: unknown, persistedQuery: unknown): PersistedQueryResolution {
    if (persistedQuery === undefined || persistedQuery === null) return { kind: "none" };
    if (typeof persistedQuery !== "object")
      return refused(DOCUMENT_REFUSALS.badRequest("extensions.persistedQuery must be an object"));
    const { version, sha256Hash } = persistedQuery as { version?: unknown; sha256Hash?: unknown };
    if (version !== 1)
      return refused(DOCUMENT_REFUSALS.badRequest("Unsupported persisted query version: only version 1 is supported"));
    if (typeof sha256Hash !== "string" || !/^[0-9a-f]{64}$/i.test(sha256Hash))
      return refused(DOCUMENT_REFUSALS.badRequest("extensions.persistedQuery.sha256Hash must be 64 hex digits"));
    const key = `${caller.organizationId} ${sha256Hash.toLowerCase()}`;
    if (typeof query === "string" && query !== "") {
      const hash = createHash("sha256").update(query).digest("hex");
      if (hash !== sha256Hash.toLowerCase())
        return refused(DOCUMENT_REFUSALS.badRequest("provided sha does not match query"));
      this.texts.set(key, query);
      return { kind: "text", query };
    }
    const known = this.texts.get(key);
    return known === undefined ? refused(DOCUMENT_REFUSALS.queryNotFound()) : { kind: "text", query: known };
  }
}

const refused = (refusal: DocumentRefusal): PersistedQueryResolution => ({ kind: "refused", refusal });
