/**
 * What the read cache may keep: what the organization's data version covers (read-cache.ts) — tags, references,
 * their updates and their lifecycle log. Webhook endpoints, deliveries and attempts change without raising the
 * version (a delivery's status moves with every attempt), so nothing that shows them is ever kept.
 *
 * GraphQL: an operation is cacheable when every field it selects belongs to one of these types, and Query only
 * through the listed fields (`node`/`nodes` can reach webhook objects, so they are not listed). REST: the GET
 * routes of the same resources declare `config: { readCache: true }` (tags, references, updates, lifecycle log).
 */
export const CACHEABLE_QUERY_FIELDS: ReadonlySet<string> = new Set([
  "tag",
  "tags",
  "reference",
  "references",
  "__typename",
  "__schema",
  "__type",
]);

export const CACHEABLE_TYPES: ReadonlySet<string> = new Set([
  "Node",
  "PageInfo",
  "Tag",
  "TagConnection",
  "TagEdge",
  "TagSnapshot",
  "Reference",
  "ReferenceConnection",
  "ReferenceEdge",
  "ReferenceUpdate",
  "ReferenceUpdateConnection",
  "ReferenceUpdateEdge",
  "LifecycleEvent",
  "LifecycleEventConnection",
  "LifecycleEventEdge",
]);
