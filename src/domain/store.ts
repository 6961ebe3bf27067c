import type { LifecycleEvent, LifecycleEventType } from "./lifecycle/lifecycle-event.ts";
import type { Organization, Reference, ReferenceUpdate, Tag, TaggedReference } from "./models.ts";
import type { WebhookDelivery } from "./webhooks/webhook-models.ts";
import type { WebhookRepository } from "./webhooks/webhook-repository.ts";

/*
 * What the domain needs from persistence, implemented once in src/store/ (Prisma). Every method is scoped by
 * organization where the data is. `transaction` runs a unit of work atomically: services write a change and
 * its lifecycle event through the same `Store` handed to the callback; once it has committed, the unit of work
 * hands the events it inserted to the `onEventsCommitted` listeners (live subscriptions, the webhook worker).
 */

/** Told after a commit, with the lifecycle events the transaction inserted. Must not throw. */
export type EventsCommittedListener = (events: readonly LifecycleEvent[]) => void;

export interface ApiKeyRecord {
  readonly id: string;
  readonly organizationId: string;
  readonly keyHash: string;
  readonly keyPrefix: string;
  readonly createdAt: Date;
  readonly revokedAt: Date | null;
}

export interface TagListQuery {
  readonly namePrefixKey?: string;
  /** keyset: list after this (name_key, id) */
  readonly after?: { readonly nameKey: string; readonly id: string };
  readonly limit: number;
}

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

export interface EventListQuery {
  readonly referenceId: string;
  readonly types?: readonly LifecycleEventType[];
  readonly from?: Date;
  readonly to?: Date;
  readonly notBefore: Date;
  readonly order: "asc" | "desc";
  /** keyset: exclusive position in (occurred_at, id) order, in the direction of `order` */
  readonly after?: { readonly occurredAt: Date; readonly id: string };
  readonly limit: number;
}

export interface Store {
  transaction<T>(work: (store: Store) => Promise<T>): Promise<T>;
  /**
   * Calls `listener` after every commit that inserted lifecycle events (never for a rolled-back transaction).
   * A hint only: the log is the source of truth. Returns a function that stops the calls.
   */
  onEventsCommitted(listener: EventsCommittedListener): () => void;
  /** Webhook endpoints and the delivery outbox, in this store's transaction when it has one. */
  readonly webhooks: WebhookRepository;

  insertOrganization(organization: Organization): Promise<void>;
  countOrganizations(): Promise<number>;
  findOrganization(id: string): Promise<Organization | null>;
  /** Every organization, oldest first (administration only: the CLI). */
  listOrganizations(): Promise<Organization[]>;
  /** The organization's keys, revoked ones included, oldest first. */
  listApiKeys(organizationId: string): Promise<ApiKeyRecord[]>;
  /**
   * Holds the organization until the transaction ends: other transactions that lock it wait, so that a count of
   * its tags taken after the lock stays true until commit (the per-organization tag limit). Only inside
   * `transaction`. Lock order, to avoid deadlocks: a reference before its organization.
   */
  lockOrganization(organizationId: string): Promise<void>;
  insertApiKey(key: ApiKeyRecord): Promise<void>;
  findApiKeyByHash(keyHash: string): Promise<ApiKeyRecord | null>;
  revokeApiKey(id: string, at: Date): Promise<ApiKeyRecord | null>;

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
   * Renames; returns null when another tag already holds the new key, including one that took it in a
   * concurrent transaction (the unique index decides). Call it outside `transaction`: on PostgreSQL a unique
   * violation would abort the surrounding transaction.
   */
  renameTag(organizationId: string, id: string, name: string, nameKey: string, at: Date): Promise<Tag | null>;
  deleteTag(organizationId: string, id: string): Promise<boolean>;
  listTags(organizationId: string, query: TagListQuery): Promise<(Tag & { readonly nameKey: string })[]>;
  countTags(organizationId: string): Promise<number>;
  findTagsByReferenceIds(referenceIds: readonly string[]): Promise<Map<string, Tag[]>>;

  insertReference(reference: Reference): Promise<void>;
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
  /** One multi-row statement whatever the number of tags; links that exist stay as they are. */
  linkTags(referenceId: string, tagIds: readonly string[], at: Date): Promise<void>;
  unlinkTag(referenceId: string, tagId: string): Promise<void>;
  countReferenceTags(referenceId: string): Promise<number>;

  insertReferenceUpdate(update: ReferenceUpdate): Promise<void>;
  listReferenceUpdates(referenceId: string, beforeId: string | undefined, limit: number): Promise<ReferenceUpdate[]>;
  findReferenceUpdatesByIds(organizationId: string, ids: readonly string[]): Promise<ReferenceUpdate[]>;

  insertEvent(event: LifecycleEvent): Promise<void>;
  /** The organization's events among `ids` that occurred at or after `notBefore` (retention). */
  findEventsByIds(organizationId: string, ids: readonly string[], notBefore: Date): Promise<LifecycleEvent[]>;
  listEvents(query: EventListQuery): Promise<LifecycleEvent[]>;
  /**
   * `listEvents` for a reference of the organization, checked in the same statement: null when the
   * organization has no such reference.
   */
  listEventsOfReference(organizationId: string, query: EventListQuery): Promise<LifecycleEvent[] | null>;
  deleteEventsBefore(cutoff: Date, batchSize: number): Promise<number>;

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
  /** Writes the mutable columns of each reference (as `updateReference` does), in one statement. */
  updateReferences(references: readonly Reference[]): Promise<void>;
  insertReferenceUpdates(updates: readonly ReferenceUpdate[]): Promise<void>;
  /**
   * Inserts events in one multi-row statement, in the order given (their log positions follow it), and hands
   * them to the unit of work like `insertEvent`, so they are published once committed.
   */
  insertEvents(events: readonly LifecycleEvent[]): Promise<void>;
  /** The webhook outbox rows of many events, in one multi-row statement. */
  insertWebhookDeliveries(deliveries: readonly WebhookDelivery[]): Promise<void>;
}
