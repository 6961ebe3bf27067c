import type { PublishedCost } from "./published-cost.ts";
import type { CachedCost } from "../read-cache/read-cache.ts";

/*
 * GraphQL answers the read cache repeats are charged like the answer they repeat: the same requested cost before,
 * the same actual cost after, so that what a request costs never depends on which instance answers it or what its
 * cache holds. A kept answer is its bytes up to its `extensions.cost` (the last member the publish stage writes)
 * and the two costs; a hit is those bytes, the cost with the caller's bucket as it is now, and the closing braces.
 */

const COST_MEMBER = '"cost":';

/** An answer's bytes up to its published cost, and that cost; null for one that publishes none. */
export function splitPublishedCost(payload: string): { head: string; cost: CachedCost } | null {
  const at = payload.lastIndexOf(`${COST_MEMBER}{"requestedQueryCost":`);
  const tail = payload.trimEnd();
  if (at < 0 || !tail.endsWith("}}")) return null;
  try {
    const cost = JSON.parse(tail.slice(at + COST_MEMBER.length, -2)) as PublishedCost;
    return { head: payload.slice(0, at), cost: { requested: cost.requestedQueryCost, actual: cost.actualQueryCost } };
  } catch {
    return null;
  }
}

/** A kept answer's bytes completed with the cost this request published. */
export function joinPublishedCost(head: Buffer, cost: PublishedCost): Buffer {
  return Buffer.concat([head, Buffer.from(`${COST_MEMBER}${JSON.stringify(cost)}}}\n`)]);
}
