import type { Tag } from "../models.ts";

/*
 * What tags need from persistence, implemented in src/store/sql/tag-repository.ts. Reached as `store.tags`
 * of a `Store`: inside `store.transaction` it writes in that transaction.
 */

export interface TagListQuery {
  readonly namePrefixKey?: string;
  /** keyset: list after this (name_key, id) */
  readonly after?: { readonly nameKey: string; readonly id: string };
  readonly limit: number;
}

export interface TagRepository {
  findTagsByIds(organizationId: string, ids: readonly string[]): Promise<Tag[]>;
  findTagsByNameKeys(organizationId: string, nameKeys: readonly string[]): Promise<Tag[]>;
  /** Inserts the tag unless one with the same name key exists; returns the tag that holds the name. */
  insertTagIfAbsent(tag: Tag & { readonly nameKey: string }): Promise<{ tag: Tag; created: boolean }>;
  /**
   * Inserts each tag unless one with its name key exists, in two statements whatever their number; returns
   * the tags that hold the names, keyed by name key.
   */
  insertTagsIfAbsent(tags: readonly (Tag & { readonly nameKey: string })[]): Promise<Map<string, Tag>>;
  /**
   * Renames, and rewrites the tag lists of the references carrying it; returns null when the tag is unknown or
   * another tag already holds the new key, including one that took it in a concurrent transaction (the unique
   * index decides; the transaction stays usable). Call it inside `transaction`.
   */
  renameTag(organizationId: string, id: string, name: string, nameKey: string, at: Date): Promise<Tag | null>;
  /** Deletes the tag and its links, and takes it off its carriers' tag lists. Call it inside `transaction`. */
  deleteTag(organizationId: string, id: string): Promise<boolean>;
  listTags(organizationId: string, query: TagListQuery): Promise<(Tag & { readonly nameKey: string })[]>;
  countTags(organizationId: string): Promise<number>;
  findTagsByReferenceIds(referenceIds: readonly string[]): Promise<Map<string, Tag[]>>;
}
