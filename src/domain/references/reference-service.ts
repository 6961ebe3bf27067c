import type { LifecycleRecorder } from "../lifecycle/lifecycle-recorder.ts";
import type { LifecycleEvent } from "../lifecycle/lifecycle-event.ts";
import type { Reference, Tag, TaggedReference } from "../models.ts";
import type { Clock } from "../shared/clock.ts";
import type { CursorCodec } from "../shared/cursor.ts";
import { notFound, validationFailed, type FieldIssue } from "../shared/errors.ts";
import { isUuid, newId } from "../shared/ids.ts";
import { pageOf, type Page } from "../shared/page.ts";
import type { Store } from "../store.ts";
import { parseTagEntries } from "../tags/tag-entry.ts";
import { sortTagsByName } from "../tags/tag-name.ts";
import type { TagService } from "../tags/tag-service.ts";
import {
  assertTagCount,
  isReferencePosition,
  parseChildContainerNumbers,
  parseReferenceIdentity,
  parseReferenceListing,
  referenceFilters,
  referenceListQuery,
  type CreateReferenceInput,
  type ListReferencesInput,
  type ReferencePosition,
} from "./reference-input.ts";
import { findReferenceIn, lockReferenceIn } from "./reference-lookup.ts";
import { newReference, referenceCreatedBody } from "./tracking-rules.ts";

export interface ReferenceLimits {
  readonly maxTagsPerReference: number;
}

/**
 * References as an organization creates, finds, lists and tags them, and the child containers a bill of lading or
 * booking reports (what the tracking side reports about a reference afterwards: reference-tracking-service.ts).
 * Every change writes its lifecycle event in the same transaction.
 */
export class ReferenceService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly cursors: CursorCodec,
    private readonly tags: TagService,
    private readonly recorder: LifecycleRecorder,
    private readonly limits: ReferenceLimits,
  ) {}

  /**
   * Creates a reference from exactly one identifier, with optional tags. Every field and every tag entry is
   * validated before anything is written; on any error nothing is saved.
   * @throws VALIDATION_FAILED (with one issue per bad field), LIMIT_EXCEEDED.
   */
  async createReference(organizationId: string, input: CreateReferenceInput): Promise<TaggedReference> {
    const issues: FieldIssue[] = [];
    const identity = parseReferenceIdentity(input, issues);
    const parsed = parseTagEntries(input.tags, { maxTags: this.limits.maxTagsPerReference });
    issues.push(...parsed.issues);
    if (issues.length > 0) throw validationFailed(issues);

    return this.store.transaction(async (store) => {
      const tags = await this.tags.resolveTagEntries(store, organizationId, parsed.entries);
      assertTagCount(tags.length, this.limits.maxTagsPerReference);
      const reference = newReference(newId(), organizationId, identity, this.clock.now());
      // Sent together, in this order (the links and the event point at the reference): one round trip on
      // PostgreSQL's pipelining connection, one statement after another on SQLite.
      await Promise.all([
        store.references.insertReference(reference),
        store.references.linkTags(
          reference.id,
          tags.map((tag) => tag.id),
          reference.createdAt,
        ),
        this.recordCreated(store, reference, tags),
      ]);
      return { ...reference, tags: sortTagsByName(tags) };
    });
  }

  /** With its tags. @throws NOT_FOUND */
  async getReference(organizationId: string, id: string): Promise<TaggedReference> {
    return findReferenceIn(this.store, organizationId, id);
  }

  /**
   * The organization's references among `ids`, with their tags, in one statement (for DataLoaders); ids of
   * other organizations or of no reference are left out, in no particular order.
   */
  referencesByIds(organizationId: string, ids: readonly string[]): Promise<TaggedReference[]> {
    return this.store.references.findReferencesByIds(organizationId, ids);
  }

  /**
   * The child references of many bills of lading or bookings at once, oldest first, with their tags, in one
   * statement (for DataLoaders). The ids are those of references the caller read through its organization;
   * children always belong to their parent's organization. Parents without children have no entry.
   */
  childrenOfReferences(parentIds: readonly string[]): Promise<Map<string, TaggedReference[]>> {
    return this.store.references.findChildrenByParentIds(parentIds);
  }

  /**
   * Newest first, filtered. Unknown tag names or ids to include match nothing; unknown ones to
   * exclude exclude nothing. Exclusions combine with every other filter by AND.
   * @throws INVALID_QUERY_PARAMETER for a malformed id, INVALID_CURSOR / CURSOR_FILTER_MISMATCH.
   */
  async listReferences(organizationId: string, input: ListReferencesInput): Promise<Page<TaggedReference>> {
    const filters = parseReferenceListing(input);
    const after = input.cursor ? this.cursors.decode(input.cursor, filters, isReferencePosition) : undefined;
    const rows = await this.store.references.listReferences(
      organizationId,
      referenceListQuery(filters, after?.i, input.limit + 1),
    );
    return pageOf(
      rows,
      input.limit,
      (reference) => this.cursors.encode<ReferencePosition>({ i: reference.id }, filters),
      after !== undefined,
    );
  }

  /**
   * The page `listReferences` gives, as the JSON texts of the references' REST representations that their rows
   * keep, joined (`[` + `json` + `]` is the page's array): a listing sends them without reading them.
   */
  async listReferenceJson(
    organizationId: string,
    input: ListReferencesInput,
  ): Promise<{ readonly json: Buffer; readonly nextCursor: string | null }> {
    const filters = parseReferenceListing(input);
    const after = input.cursor ? this.cursors.decode(input.cursor, filters, isReferencePosition) : undefined;
    const page = await this.store.references.readReferenceJsonPage(
      organizationId,
      referenceListQuery(filters, after?.i, input.limit),
    );
    const nextCursor =
      page.more && page.lastId !== null ? this.cursors.encode<ReferencePosition>({ i: page.lastId }, filters) : null;
    return { json: page.json, nextCursor };
  }

  /**
   * The first page of `listReferences({ tagIds: [tagId], limit })` for each of many tags, in two queries
   * whatever the number of tags (GraphQL's `Tag.references` over a list of tags). Items, cursors and
   * `nextCursor` are those `listReferences` gives for one tag, so a page continues there. Ids that are not
   * tags of the organization get an empty page.
   */
  async listFirstReferencesByTagIds(
    organizationId: string,
    tagIds: readonly string[],
    limit: number,
  ): Promise<Map<string, Page<Reference>>> {
    const keys = [...new Set(tagIds.filter(isUuid).map((id) => id.toLowerCase()))];
    const idsByTag = await this.store.references.listReferenceIdsByTagIds(organizationId, keys, limit + 1);
    const referenceIds = [...new Set([...idsByTag.values()].flat())];
    const references = new Map(
      (await this.store.references.findReferencesByIds(organizationId, referenceIds)).map((reference) => [
        reference.id,
        reference,
      ]),
    );
    const pages = new Map<string, Page<Reference>>();
    for (const tagId of tagIds) {
      const filters = referenceFilters({ tagIds: [tagId.toLowerCase()], limit });
      const rows = (idsByTag.get(tagId.toLowerCase()) ?? []).flatMap((id) => references.get(id) ?? []);
      pages.set(
        tagId,
        pageOf(rows, limit, (reference) => this.cursors.encode<ReferencePosition>({ i: reference.id }, filters), false),
      );
    }
    return pages;
  }

  /**
   * Adds tags (found or created by name); tags already on the reference stay as they are.
   * @throws NOT_FOUND, VALIDATION_FAILED, LIMIT_EXCEEDED (more than the per-reference limit in total).
   */
  async addTags(organizationId: string, referenceId: string, rawTags: unknown): Promise<Tag[]> {
    const parsed = parseTagEntries(rawTags, { maxTags: this.limits.maxTagsPerReference });
    if (parsed.issues.length > 0) throw validationFailed(parsed.issues);
    if (rawTags === undefined || rawTags === null) {
      throw validationFailed([{ path: ["tags"], code: "REQUIRED", message: "tags is required" }]);
    }
    return this.store.transaction(async (store) => {
      // Locked before its tags are counted: parallel adds to one reference are counted one after another.
      const reference = await lockReferenceIn(store, organizationId, referenceId);
      const tags = await this.tags.resolveTagEntries(store, organizationId, parsed.entries);
      const current = reference.tags;
      const combined = new Set([...current.map((tag) => tag.id), ...tags.map((tag) => tag.id)]);
      assertTagCount(combined.size, this.limits.maxTagsPerReference);
      await store.references.linkTags(
        reference.id,
        tags.map((tag) => tag.id),
        this.clock.now(),
      );
      return (await store.tags.findTagsByReferenceIds([reference.id])).get(reference.id) ?? [];
    });
  }

  /**
   * Removes a tag from a reference; the tag itself remains. Removing a tag that is not on the reference is
   * not an error. @throws NOT_FOUND for an unknown reference or tag.
   */
  async removeTag(organizationId: string, referenceId: string, tagId: string): Promise<void> {
    await this.store.transaction(async (store) => {
      // Locked like addTags: a concurrent event is written wholly before the removal (carrying the tag) or after.
      const reference = await lockReferenceIn(store, organizationId, referenceId);
      const [tag] = isUuid(tagId) ? await store.tags.findTagsByIds(organizationId, [tagId.toLowerCase()]) : [];
      if (!tag) throw notFound("tag");
      await store.references.unlinkTag(reference.id, tag.id);
    });
  }

  /**
   * Records the containers found on a bill of lading or booking: each new container becomes a child
   * reference with its own `reference_created` event and a one-time copy of the parent's current tags.
   * A container already reported is returned, not duplicated. Result order follows the input.
   * @throws NOT_FOUND, VALIDATION_FAILED (bad container numbers; a parent that is itself a container).
   */
  async reportChildren(organizationId: string, parentId: string, containerIds: unknown): Promise<Reference[]> {
    const numbers = parseChildContainerNumbers(containerIds);

    return this.store.transaction(async (store) => {
      // Locked so that parallel reports of one parent see each other's children; the unique index on
      // (parent, container) behind insertChildIfAbsent is the last word if anything else inserts children.
      const parent = await lockReferenceIn(store, organizationId, parentId);
      if (parent.containerId !== null) {
        throw validationFailed([
          {
            path: [],
            code: "NOT_A_PARENT",
            message: "only a bill of lading or booking reference can have child containers",
          },
        ]);
      }
      const parentTags = parent.tags;
      const existing = new Map<string, Reference>(
        ((await store.references.findChildrenByParentIds([parent.id])).get(parent.id) ?? []).map((child) => [
          child.containerId!,
          child,
        ]),
      );
      const result: Reference[] = [];
      for (const containerId of new Set(numbers)) {
        let child = existing.get(containerId);
        if (!child) {
          const { reference, created } = await store.references.insertChildIfAbsent(
            newReference(
              newId(),
              organizationId,
              {
                containerId,
                billOfLading: null,
                bookingNumber: null,
                carrierCode: parent.carrierCode,
                parentReferenceId: parent.id,
              },
              this.clock.now(),
            ),
          );
          child = reference;
          if (created) {
            await store.references.linkTags(
              child.id,
              parentTags.map((tag) => tag.id),
              child.createdAt,
            );
            await this.recordCreated(store, child, parentTags);
          }
          existing.set(containerId, child);
        }
        result.push(child);
      }
      return result;
    });
  }

  private recordCreated(store: Store, reference: Reference, tags: readonly Tag[]): Promise<LifecycleEvent> {
    return this.recorder.record(store, reference, tags, referenceCreatedBody(reference));
  }
}
