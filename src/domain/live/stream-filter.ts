import {
  isLifecycleEventType,
  LIFECYCLE_EVENT_TYPES,
  type LifecycleEvent,
  type LifecycleEventType,
} from "../lifecycle/lifecycle-event.ts";
import { findReferenceIn } from "../references/reference-lookup.ts";
import { MAX_TAG_FILTER_VALUES } from "../references/reference-input.ts";
import { DomainError, type FieldIssue } from "../shared/errors.ts";
import { isUuid } from "../shared/ids.ts";
import type { Store } from "../store.ts";
import { normalizeTagName, tagNameKey } from "../tags/tag-name.ts";

/*
 * Which events of the organization's log a reader of it in live order receives: a live subscription
 * (src/live/live-subscriptions.ts) and the feed to poll (event-feed-service.ts) take the same filters, resolved
 * the same way, and run the same predicate, so that a poller and a subscriber with the same filters see the
 * same events.
 */

/** Which events a reader receives. An absent field means "any". */
export interface StreamFilter {
  readonly referenceId?: string;
  readonly types?: ReadonlySet<LifecycleEventType>;
  /**
   * Events whose reference carried at least one of these tags *when the event was written* (the event's
   * `referenceTags` snapshot, as in webhook payloads): the same answer whether the event is replayed, live or
   * polled. An empty set (only unknown names were given) matches nothing.
   */
  readonly tagIds?: ReadonlySet<string>;
  /** Events whose reference carried none of these tags when the event was written (the same snapshot). */
  readonly excludedTagIds?: ReadonlySet<string>;
}

export function matchesStreamFilter(event: LifecycleEvent, filter: StreamFilter): boolean {
  if (filter.referenceId !== undefined && event.referenceId !== filter.referenceId) return false;
  if (filter.types && !filter.types.has(event.type)) return false;
  if (filter.tagIds) {
    const tagIds = filter.tagIds;
    if (!event.referenceTags.some((tag) => tagIds.has(tag.id))) return false;
  }
  if (filter.excludedTagIds) {
    const excluded = filter.excludedTagIds;
    if (event.referenceTags.some((tag) => excluded.has(tag.id))) return false;
  }
  return true;
}

/** The filters as either surface gives them; null and empty lists mean "no filter". */
export interface StreamFilterInput {
  readonly referenceId?: string | null;
  readonly tagIds?: readonly string[] | null;
  /** Tag names, matched case-insensitively against the organization's tags when the filter is resolved. */
  readonly tagNames?: readonly string[] | null;
  readonly excludeTagIds?: readonly string[] | null;
  readonly excludeTagNames?: readonly string[] | null;
  readonly types?: readonly string[] | null;
}

/**
 * Checks the filters and resolves them against the organization: the reference must be one of its own, tag names
 * become the ids of the tags that bear them now (a renamed tag keeps its id, so a filter resolved once keeps
 * matching it), unknown ids and names match (or exclude) nothing. `tagIds` and `tagNames` together: at least one
 * of the tags; exclusions: none of them; all given filters must match.
 * @throws INVALID_QUERY_PARAMETER (a malformed tag id, too many tag values), INVALID_EVENT_TYPE, NOT_FOUND (the
 *         reference is not the organization's).
 */
export async function resolveStreamFilter(
  store: Store,
  organizationId: string,
  input: StreamFilterInput,
): Promise<StreamFilter> {
  const issues: FieldIssue[] = [];
  const tagIds = checkTagIds("tagIds", input.tagIds ?? [], issues);
  const excludeTagIds = checkTagIds("excludeTagIds", input.excludeTagIds ?? [], issues);
  const tagNames = input.tagNames ?? [];
  const excludeTagNames = input.excludeTagNames ?? [];
  checkCount("tagIds", "tagNames", tagIds.length, tagNames.length, issues);
  checkCount("excludeTagIds", "excludeTagNames", excludeTagIds.length, excludeTagNames.length, issues);
  if (issues.length > 0) throw new DomainError("INVALID_QUERY_PARAMETER", issues[0]!.message, issues);
  const types = input.types ?? [];
  const unknown = types.filter((type) => !isLifecycleEventType(type));
  if (unknown.length > 0) {
    throw new DomainError("INVALID_EVENT_TYPE", `Unknown event type ${unknown.map((t) => `"${t}"`).join(", ")}`, [
      // `type`, as the REST parameter and the domain's other listings name it; GraphQL's locators say `types`.
      { path: ["type"], code: "INVALID_EVENT_TYPE", message: `valid types are ${LIFECYCLE_EVENT_TYPES.join(", ")}` },
    ]);
  }
  const filter: {
    referenceId?: string;
    types?: Set<LifecycleEventType>;
    tagIds?: Set<string>;
    excludedTagIds?: Set<string>;
  } = {};
  if (types.length > 0) filter.types = new Set(types as LifecycleEventType[]);
  const [reference, named, excludedByName] = await Promise.all([
    input.referenceId !== undefined && input.referenceId !== null
      ? findReferenceIn(store, organizationId, input.referenceId)
      : undefined,
    tagIdsByNames(store, organizationId, tagNames),
    tagIdsByNames(store, organizationId, excludeTagNames),
  ]);
  if (reference) filter.referenceId = reference.id;
  if (tagIds.length + tagNames.length > 0) filter.tagIds = new Set([...tagIds, ...named]);
  const excluded = [...excludeTagIds, ...excludedByName];
  if (excluded.length > 0) filter.excludedTagIds = new Set(excluded);
  return filter;
}

function checkTagIds(field: string, ids: readonly string[], issues: FieldIssue[]): string[] {
  ids.forEach((id, index) => {
    if (!isUuid(id)) issues.push({ path: [field, index], code: "INVALID_QUERY_PARAMETER", message: "not a UUID" });
  });
  return ids.map((id) => id.toLowerCase());
}

function checkCount(idsField: string, namesField: string, ids: number, names: number, issues: FieldIssue[]): void {
  if (ids + names <= MAX_TAG_FILTER_VALUES) return;
  issues.push({
    path: [ids > 0 ? idsField : namesField],
    code: "TOO_MANY_VALUES",
    message: `at most ${MAX_TAG_FILTER_VALUES} tag ids and names together in {${idsField}} and {${namesField}}`,
  });
}

/** The ids of the organization's tags named `names` now (case-insensitively); a name no tag bears adds none. */
async function tagIdsByNames(store: Store, organizationId: string, names: readonly string[]): Promise<string[]> {
  const keys = new Set<string>();
  for (const name of names) {
    const checked = normalizeTagName(name);
    // A string that cannot be a tag's name is the name of no tag.
    if (checked.ok) keys.add(tagNameKey(checked.name));
  }
  if (keys.size === 0) return [];
  return (await store.tags.findTagsByNameKeys(organizationId, [...keys])).map((tag) => tag.id);
}
