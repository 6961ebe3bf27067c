import { storedScopes } from "../../domain/organizations/api-key-scopes.ts";
import { createHash } from "node:crypto";
import { LRUCache } from "lru-cache";
import { Counter, Gauge, type Registry } from "prom-client";
import type { Caller } from "../../domain/organizations/organization-service.ts";

/**
 * Responses of reads — REST GET pages of tags, references and lifecycle events, GraphQL queries of the same —
 * kept per organization under its read version (`Caller.readVersion`, docs/decisions.md, "Read cache"): the
 * organization's data version, which the database raises in the same commit as any change a cached read could
 * show (migration 0007), and its oldest event inside the retention window, the one thing that changes what a
 * read shows without a commit. Authentication reads both before the request reads any data. So an entry is only
 * ever found by a request that authenticated after every change the entry reflects and before any newer one: a
 * hit answers exactly what computing the response afresh would, on every instance, whoever wrote last. Entries of
 * older versions are never found again; the least recently used go first when the cache is full.
 *
 * `lru-cache` keeps the entries, bounded in bytes: a response's bytes and its key's. The key holds a SHA-256
 * digest of the request, not the request itself, so that a request of any size (a GraphQL query with large
 * variables) costs the cache a few dozen bytes of key; what is ours is only the key.
 * The callers are REST's hook (src/rest/read-cache.hooks.ts, GET routes) and the GraphQL pipeline's look-up and
 * publish stages (src/pipeline/graphql-pipeline.ts); what may be cached is listed once, in cacheable-types.ts. Both
 * receive an authenticated caller: the cache never authenticates.
 */
export class ReadCache {
  private readonly entries: LRUCache<string, CachedResponse> | null;
  private readonly lookups: Counter<"result"> | null;

  constructor(options: { readonly maxBytes: number; readonly registry?: Registry }) {
    const entries =
      options.maxBytes > 0
        ? new LRUCache<string, CachedResponse>({
            maxSize: options.maxBytes,
            sizeCalculation: (entry, key) => entry.body.length + Buffer.byteLength(key),
          })
        : null;
    this.entries = entries;
    const registers = options.registry ? [options.registry] : [];
    this.lookups = entries
      ? new Counter({
          name: "reftrail_read_cache_lookups_total",
          help: "Reads looked up in the read cache, by result (hit, miss)",
          labelNames: ["result"] as const,
          registers,
        })
      : null;
    if (entries) {
      new Gauge({
        name: "reftrail_read_cache_bytes",
        help: "Bytes of responses and their keys the read cache holds (its bound is READ_CACHE_MAX_BYTES)",
        registers,
        collect() {
          this.set(entries.calculatedSize);
        },
      });
    }
  }

  /**
   * The key of `request` (what identifies the response within the organization) for this caller: the request
   * as a digest, a fixed size whatever the request's.
   */
  keyOf(caller: Pick<Caller, "organizationId" | "readVersion" | "scopes">, request: string): string {
    // The scopes are part of the key: an answer computed for a key that may read a field is not one for a key
    // that may not (its answer has a FORBIDDEN error in the field's place). In the digest, so that the key keeps
    // its fixed size whatever the scopes.
    const digest = createHash("sha256")
      .update(`${storedScopes(caller.scopes)}\n`)
      .update(request)
      .digest("base64url");
    return `${caller.organizationId} ${caller.readVersion} ${digest}`;
  }

  /** The response kept under `key`, counted as a hit or a miss. */
  find(key: string): CachedResponse | undefined {
    const entry = this.findHit(key);
    if (!entry) this.countMiss();
    return entry;
  }

  /**
   * The response kept under `key`, counted when found. For a caller that learns only later whether the request
   * was a read at all (GraphQL: once its document is parsed), and then calls {@link countMiss}.
   */
  findHit(key: string): CachedResponse | undefined {
    const entry = this.entries?.get(key);
    if (entry) this.lookups?.inc({ result: "hit" });
    return entry;
  }

  /** Counts a read that was looked up and not found. */
  countMiss(): void {
    this.lookups?.inc({ result: "miss" });
  }

  /**
   * Keeps a response as its bytes: a hit goes to the socket as it is, not re-encoded from a string every time.
   * One larger than the whole cache would be refused by lru-cache with a warning: it is skipped quietly.
   */
  keep(key: string, payload: string | Buffer, contentType: string, cost?: CachedCost): void {
    if (!this.entries) return;
    const body = typeof payload === "string" ? Buffer.from(payload) : payload;
    if (body.length + Buffer.byteLength(key) > this.entries.maxSize) return;
    this.entries.set(key, cost ? { body, contentType, cost } : { body, contentType });
  }
}

/** A response as it was sent. */
export interface CachedResponse {
  readonly body: Buffer;
  readonly contentType: string;
  /** GraphQL: the costs the response published; `body` then ends where its `extensions.cost` began. */
  readonly cost?: CachedCost;
}

/** What a GraphQL response kept in the cache cost when it was computed (src/pipeline/budget/cached-cost.ts). */
export interface CachedCost {
  readonly requested: number;
  readonly actual: number;
}

/**
 * A request with `Cache-Control: no-cache` (or `no-store`) is computed afresh and not stored (RFC 9111 §5.2.1):
 * a client, or a benchmark, that wants the response from the database itself. Responses are exact either way.
 */
export function refusesCachedResponse(cacheControl: unknown): boolean {
  return typeof cacheControl === "string" && /(?:^|,)\s*no-(?:cache|store)\s*(?:,|$)/i.test(cacheControl);
}
