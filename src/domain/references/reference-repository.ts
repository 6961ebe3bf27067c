import type { Reference, ReferenceJsonPage, ReferenceUpdate, TaggedReference } from "../models.ts";

/*
 * What references need from persistence (references, their children and tag links, the update documents
 * reported for them), implemented in src/store/sql/reference-repository.ts. Reached as `store.references` of
 * a `Store`: inside `store.transaction` it writes in that transaction.
 */

/** Tags listed by id and by name key; only the organization's tags count, unknown ones are none. */
export interface ListedTags {
  readonly ids: readonly string[];
  readonly nameKeys: readonly string[];
}

/**
 * Tags a listed reference must carry. With `all`, a listed tag that does not exist matches nothing; with
 * `any`, it is ignored.
 */
export interface ReferenceTagFilter extends ListedTags {
  readonly match: "all" | "any";
}

export interface ReferenceListQuery {
  readonly tags?: ReferenceTagFilter;
  /** References carrying any of these tags are left out; a listed tag that does not exist excludes nothing. */
  readonly excludedTags?: ListedTags;
  readonly active?: boolean;
  readonly carrierCode?: string;
  readonly containerId?: string;
  readonly billOfLading?: string;
  readonly bookingNumber?: string;
  readonly parentReferenceId?: string;
  /** keyset: ids are UUIDv7, newest first, so "after" means id < beforeId */
  readonly beforeId?: string;
  readonly limit: number;
}

export interface ReferenceRepository {
  insertReference(reference: Reference): Promise<void>;
  /**
   * Writes the reference's tracking state: what the tracking rules change (active, the deactivation, the
   * extraction outcome and its count of failures, the estimates, `updatedAt`). Its identifiers (container, bill of
   * lading, booking, carrier, parent) are set at creation and never written again.
   */
  updateReference(reference: Reference): Promise<void>;
  /** With their tags, in one statement. */
  findReferencesByIds(organizationId: string, ids: readonly string[]): Promise<TaggedReference[]>;
  /**
   * Reads a reference and holds it until the transaction ends: a concurrent transaction that locks the same
   * reference waits for this one to commit and then reads the committed row. Every read-check-write of a
   * reference's state (deactivate, reactivate, failure counts, tag limit, children) starts with it, so that
   * each change is decided on the current row and logged once. Only inside `transaction`.
   */
  lockReference(organizationId: string, id: string): Promise<TaggedReference | null>;
  /**
   * Inserts a child reference unless its parent already has a child with that container (a unique index on
   * parent and container decides, also between concurrent transactions); returns the child that holds the
   * container and whether this call created it.
   */
  insertChildIfAbsent(child: Reference): Promise<{ reference: Reference; created: boolean }>;
  /** Newest first, with their tags, in one statement (tag filter included). */
  listReferences(organizationId: string, query: ReferenceListQuery): Promise<TaggedReference[]>;
  /**
   * The same page as `listReferences`, as the JSON texts its rows keep, joined in the database: one value to
   * read whatever the page's length.
   */
  readReferenceJsonPage(organizationId: string, query: ReferenceListQuery): Promise<ReferenceJsonPage>;
  /**
   * For each tag, the ids of the newest `limitPerTag` references carrying it (id descending), in one query
   * whatever the number of tags. Every given tag id is a key of the result.
   */
  listReferenceIdsByTagIds(
    organizationId: string,
    tagIds: readonly string[],
    limitPerTag: number,
  ): Promise<Map<string, string[]>>;
  /** Oldest first, with their tags, in one statement. */
  findChildrenByParentIds(parentIds: readonly string[]): Promise<Map<string, TaggedReference[]>>;
  /**
   * One multi-row statement whatever the number of tags; links that exist stay as they are. The reference's tag
   * list (what pages read) is rewritten with them. Call it inside `transaction`, with the reference locked
   * (`lockReference`) or inserted in that transaction.
   */
  linkTags(referenceId: string, tagIds: readonly string[], at: Date): Promise<void>;
  /** Removes one link and rewrites the tag list; called as `linkTags` is. */
  unlinkTag(referenceId: string, tagId: string): Promise<void>;
  countReferenceTags(referenceId: string): Promise<number>;

  insertReferenceUpdate(update: ReferenceUpdate): Promise<void>;
  listReferenceUpdates(referenceId: string, beforeId: string | undefined, limit: number): Promise<ReferenceUpdate[]>;
  findReferenceUpdatesByIds(organizationId: string, ids: readonly string[]): Promise<ReferenceUpdate[]>;

  // ---------------------------------------------------------------------------------------------------------
  // Set-wise writes (bulk ingestion): each method costs a fixed number of statements whatever the number of
  // rows, except that a multi-row statement is cut in chunks past the database's bound-parameter limit.
  // ---------------------------------------------------------------------------------------------------------

  /**
   * `lockReference` for many references at once: locks the organization's references among `ids` in one
   * statement, in id order (so that two bulk writers never wait on each other in a cycle, and a single-item
   * writer, which holds one reference, never closes one), then reads them with their tags in one statement.
   * Unknown ids are left out. Only inside `transaction`.
   */
  lockReferences(organizationId: string, ids: readonly string[]): Promise<TaggedReference[]>;
  /** Writes the tracking state of each reference (as `updateReference` does), in one statement. */
  updateReferences(references: readonly Reference[]): Promise<void>;
  insertReferenceUpdates(updates: readonly ReferenceUpdate[]): Promise<void>;
}
