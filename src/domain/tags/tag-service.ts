import { CLI_CHANGE, type ChangeContext } from "../audit/audit-event.ts";
import type { AuditLogService } from "../audit/audit-log-service.ts";
import type { Clock } from "../shared/clock.ts";
import type { CursorCodec } from "../shared/cursor.ts";
import { DomainError, notFound, validationFailed, type FieldIssue } from "../shared/errors.ts";
import { isUuid, newId } from "../shared/ids.ts";
import { pageOf, type Page } from "../shared/page.ts";
import type { Tag } from "../models.ts";
import type { Store } from "../store.ts";
import type { TagEntry } from "./tag-entry.ts";
import { normalizeTagName, tagNameKey } from "./tag-name.ts";

export interface TagLimits {
  readonly maxTagsPerOrganization: number;
}

export interface ListTagsInput {
  readonly namePrefix?: string;
  readonly limit: number;
  readonly cursor?: string;
}

type TagPosition = { readonly k: string; readonly i: string };
const isTagPosition = (value: unknown): value is TagPosition =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as TagPosition).k === "string" &&
  isUuid((value as TagPosition).i);

/**
 * Tags of an organization. Names are unique case-insensitively; the stored name keeps the spelling
 * it was created (or last renamed) with.
 */
export class TagService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly cursors: CursorCodec,
    private readonly limits: TagLimits,
    /** Records deletions in their transaction. */
    private readonly audit: AuditLogService,
  ) {}

  /**
   * Creates a tag.
   * @throws VALIDATION_FAILED for an invalid name (path `name`), CONFLICT when the name is taken (the
   *         existing tag is in `meta.existingTag`), LIMIT_EXCEEDED at the organization's tag limit.
   */
  async createTag(organizationId: string, rawName: unknown): Promise<Tag> {
    const name = this.checkName(rawName);
    return this.store.transaction(async (store) => {
      // Under the organization's lock: the name's holder and the count, sent with the lock (the database runs
      // them after it).
      const [, [existing], count] = await Promise.all([
        store.organizations.lockOrganization(organizationId),
        store.tags.findTagsByNameKeys(organizationId, [tagNameKey(name)]),
        store.tags.countTags(organizationId),
      ]);
      if (existing) throw this.nameTaken(existing);
      this.assertRoomForTags(count, 1);
      const { tag, created } = await store.tags.insertTagIfAbsent(this.newTag(organizationId, name));
      if (!created) throw this.nameTaken(tag);
      return tag;
    });
  }

  /** @throws NOT_FOUND when the id is unknown in this organization (or not an id at all). */
  async getTag(organizationId: string, id: string): Promise<Tag> {
    const [tag] = isUuid(id) ? await this.store.tags.findTagsByIds(organizationId, [id.toLowerCase()]) : [];
    if (!tag) throw notFound("tag");
    return tag;
  }

  /**
   * The tags of many references at once, in one statement, each reference's in name order (for DataLoaders
   * and pages). The ids are those of references the caller read through its organization; a reference's tags
   * are always of the reference's organization. Unknown ids have no entry.
   */
  tagsOfReferences(referenceIds: readonly string[]): Promise<Map<string, Tag[]>> {
    return this.store.tags.findTagsByReferenceIds(referenceIds);
  }

  /** Tags in case-insensitive name order, optionally only those whose name starts with `namePrefix`. */
  async listTags(organizationId: string, input: ListTagsInput): Promise<Page<Tag>> {
    const prefix = input.namePrefix === undefined ? undefined : tagNameKey(input.namePrefix.trim().normalize("NFC"));
    const filters = { scope: "tags", prefix };
    const after = input.cursor ? this.cursors.decode(input.cursor, filters, isTagPosition) : undefined;
    const rows = await this.store.tags.listTags(organizationId, {
      namePrefixKey: prefix || undefined,
      after: after && { nameKey: after.k, id: after.i },
      limit: input.limit + 1,
    });
    return pageOf(
      rows,
      input.limit,
      (tag) => this.cursors.encode<TagPosition>({ k: tag.nameKey, i: tag.id }, filters),
      after !== undefined,
    );
  }

  /**
   * Renames a tag; a change of case only is allowed.
   * @throws NOT_FOUND, VALIDATION_FAILED, CONFLICT (another tag holds the name; `meta.existingTag`).
   */
  async renameTag(organizationId: string, id: string, rawName: unknown): Promise<Tag> {
    const name = this.checkName(rawName);
    // The rename and its carriers' tag lists in one transaction; the holder of a taken name is read after it.
    const tag = await this.getTag(organizationId, id);
    const renamed = await this.store.transaction((store) =>
      store.tags.renameTag(organizationId, tag.id, name, tagNameKey(name), this.clock.now()),
    );
    if (renamed) return renamed;
    // Nothing renamed: another tag holds the name, or this tag was deleted meanwhile (NOT_FOUND then).
    const [holder] = await this.store.tags.findTagsByNameKeys(organizationId, [tagNameKey(name)]);
    if (holder) throw this.nameTaken(holder);
    await this.getTag(organizationId, tag.id);
    throw this.nameTaken(tag);
  }

  /** Deletes a tag and, through the foreign key's cascade, its links to every reference. */
  async deleteTag(organizationId: string, id: string, change: ChangeContext = CLI_CHANGE): Promise<void> {
    const deleted =
      isUuid(id) &&
      (await this.store.transaction(async (store) => {
        if (!(await store.tags.deleteTag(organizationId, id.toLowerCase()))) return false;
        // Recorded in the deletion's transaction; the name is gone with the tag, its id stays the target.
        await this.audit.record(store, change, {
          organizationId,
          action: "tag.deleted",
          target: { type: "tag", id: id.toLowerCase() },
        });
        return true;
      }));
    if (!deleted) throw notFound("tag");
  }

  /**
   * Turns validated tag entries into tags, inside the caller's transaction: `{id}` entries must exist,
   * `{name}` entries are found case-insensitively or created. The same tag named twice is returned once.
   * Every unknown id is reported before anything is created.
   * @throws VALIDATION_FAILED (unknown ids, path `<field>/<index>/id`), LIMIT_EXCEEDED.
   */
  async resolveTagEntries(
    store: Store,
    organizationId: string,
    entries: readonly TagEntry[],
    field = "tags",
  ): Promise<Tag[]> {
    const ids = [...new Set(entries.flatMap((entry) => (entry.kind === "id" ? [entry.id] : [])))];
    const names = new Map<string, string>();
    // The first spelling of a name in the request is the one a new tag is created with.
    for (const entry of entries) {
      if (entry.kind === "name" && !names.has(tagNameKey(entry.name))) names.set(tagNameKey(entry.name), entry.name);
    }
    // Both reads at once (one round trip on PostgreSQL's pipelining connection).
    const [byId, byName] = await Promise.all([
      store.tags.findTagsByIds(organizationId, ids),
      store.tags.findTagsByNameKeys(organizationId, [...names.keys()]),
    ]);
    const found = new Map(byId.map((tag) => [tag.id, tag]));
    const issues: FieldIssue[] = [];
    entries.forEach((entry, index) => {
      if (entry.kind === "id" && !found.has(entry.id)) {
        issues.push({ path: [field, index, "id"], code: "UNKNOWN_TAG", message: `no tag with id ${entry.id}` });
      }
    });
    if (issues.length > 0) throw validationFailed(issues);

    const existingByKey = new Map(byName.map((tag) => [tagNameKey(tag.name), tag]));
    let missing = [...names].filter(([key]) => !existingByKey.has(key));
    if (missing.length > 0) {
      // Counted under the organization's lock, so that parallel requests cannot all see room for their tags;
      // names created by a request that held the lock before are found again rather than counted twice. The
      // lock, the second read and the count are sent together: the database runs them in that order.
      const [, foundAgain, count] = await Promise.all([
        store.organizations.lockOrganization(organizationId),
        store.tags.findTagsByNameKeys(
          organizationId,
          missing.map(([key]) => key),
        ),
        store.tags.countTags(organizationId),
      ]);
      for (const tag of foundAgain) existingByKey.set(tagNameKey(tag.name), tag);
      missing = missing.filter(([key]) => !existingByKey.has(key));
      if (missing.length > 0) this.assertRoomForTags(count, missing.length);
    }
    // All missing names in one INSERT … ON CONFLICT DO NOTHING and one read of their holders.
    const created = await store.tags.insertTagsIfAbsent(missing.map(([, name]) => this.newTag(organizationId, name)));
    for (const [key] of missing) {
      const tag = created.get(key);
      if (!tag) throw new Error(`tag "${key}" neither inserted nor found`);
      existingByKey.set(key, tag);
    }

    const resolved = new Map<string, Tag>();
    for (const entry of entries) {
      const tag = entry.kind === "id" ? found.get(entry.id)! : existingByKey.get(tagNameKey(entry.name))!;
      resolved.set(tag.id, tag);
    }
    return [...resolved.values()];
  }

  /** @param count the organization's tags, counted under its lock. */
  private assertRoomForTags(count: number, adding: number): void {
    if (count + adding > this.limits.maxTagsPerOrganization) {
      throw new DomainError(
        "LIMIT_EXCEEDED",
        `An organization can have at most ${this.limits.maxTagsPerOrganization} tags (it has ${count})`,
        [],
        { limit: this.limits.maxTagsPerOrganization },
      );
    }
  }

  private checkName(rawName: unknown): string {
    const checked = normalizeTagName(rawName);
    if (!checked.ok) throw validationFailed([{ path: ["name"], code: checked.code, message: checked.message }]);
    return checked.name;
  }

  private nameTaken(existing: Tag): DomainError {
    return new DomainError("CONFLICT", `A tag named "${existing.name}" already exists`, [], { existingTag: existing });
  }

  private newTag(organizationId: string, name: string): Tag & { nameKey: string } {
    const now = this.clock.now();
    return { id: newId(), organizationId, name, nameKey: tagNameKey(name), createdAt: now, updatedAt: now };
  }
}
