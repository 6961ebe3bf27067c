import { DomainError, type FieldIssue } from "../shared/errors.ts";
import { isUuid } from "../shared/ids.ts";
import { normalizeTagName, tagNameKey } from "./tag-name.ts";

/** A validated tag entry of a request: an existing tag by id, or a tag by name (found or created). */
export type TagEntry = { readonly kind: "id"; readonly id: string } | { readonly kind: "name"; readonly name: string };

export interface ParsedTagEntries {
  readonly entries: readonly TagEntry[];
  readonly issues: readonly FieldIssue[];
}

/**
 * The most entries one request may carry, duplicates included. Far above any useful request (a reference
 * carries at most the per-reference limit, 50 by default); it bounds the work done on a request before it is
 * refused.
 */
export const MAX_TAG_ENTRIES_PER_REQUEST = 1_000;

function tooManyTags(field: string, limit: number, message: string): DomainError {
  return new DomainError("LIMIT_EXCEEDED", message, [{ path: [field], code: "LIMIT_EXCEEDED", message }], { limit });
}

/**
 * Validates a `tags` array from any surface: each entry is exactly `{ id }` or `{ name }`.
 * Returns every problem at once, with paths such as `["tags", 2, "name"]`, so that the caller can reject the
 * whole request before anything is written. Whether an id exists is checked later, against the database.
 * @throws LIMIT_EXCEEDED before any database work when the request holds more than
 *         {@link MAX_TAG_ENTRIES_PER_REQUEST} entries, or more distinct ids and names than `maxTags` (one
 *         reference can never carry them all).
 */
export function parseTagEntries(raw: unknown, { field = "tags", maxTags = Infinity } = {}): ParsedTagEntries {
  if (raw === undefined || raw === null) return { entries: [], issues: [] };
  if (!Array.isArray(raw)) {
    return { entries: [], issues: [{ path: [field], code: "INVALID_TYPE", message: `${field} must be an array` }] };
  }
  if (raw.length > MAX_TAG_ENTRIES_PER_REQUEST) {
    throw tooManyTags(
      field,
      MAX_TAG_ENTRIES_PER_REQUEST,
      `A request may carry at most ${MAX_TAG_ENTRIES_PER_REQUEST} tag entries (this one has ${raw.length})`,
    );
  }
  const entries: TagEntry[] = [];
  const issues: FieldIssue[] = [];
  raw.forEach((item: unknown, index) => {
    const at = (...rest: string[]) => [field, index, ...rest];
    if (item === null || typeof item !== "object" || Array.isArray(item)) {
      issues.push({ path: at(), code: "INVALID_TYPE", message: "a tag entry must be an object { id } or { name }" });
      return;
    }
    const record = item as Record<string, unknown>;
    const keys = Object.keys(record).filter((key) => record[key] !== undefined);
    const extra = keys.filter((key) => key !== "id" && key !== "name");
    if (extra.length > 0) {
      for (const key of extra) {
        issues.push({ path: at(key), code: "UNKNOWN_FIELD", message: `unknown field "${key}" in a tag entry` });
      }
      return;
    }
    if (keys.length !== 1) {
      issues.push({
        path: at(),
        code: "ONE_OF",
        message: "a tag entry must have exactly one of id or name",
      });
      return;
    }
    if (keys[0] === "id") {
      if (!isUuid(record.id)) {
        issues.push({ path: at("id"), code: "INVALID_ID", message: "id must be a tag id (UUID)" });
        return;
      }
      entries.push({ kind: "id", id: record.id.toLowerCase() });
      return;
    }
    const checked = normalizeTagName(record.name);
    if (!checked.ok) {
      issues.push({ path: at("name"), code: checked.code, message: checked.message });
      return;
    }
    entries.push({ kind: "name", name: checked.name });
  });
  const distinct = new Set(
    entries.map((entry) => (entry.kind === "id" ? `id:${entry.id}` : `name:${tagNameKey(entry.name)}`)),
  );
  if (distinct.size > maxTags) {
    throw tooManyTags(
      field,
      maxTags,
      `A reference can carry at most ${maxTags} tags (this request names ${distinct.size} different ones)`,
    );
  }
  return { entries, issues };
}
