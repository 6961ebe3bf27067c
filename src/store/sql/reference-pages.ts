import type {
  ListedTags,
  ReferenceListQuery,
  ReferenceTagFilter,
} from "../../domain/references/reference-repository.ts";
import type { DatabaseProvider } from "../database.ts";
import { Prisma } from "./sql-template.ts";
import { isOneOf, valueTable } from "./value-lists.ts";
import { literalLimit } from "./literal-limit.ts";

/*
 * The pages of references (ReferenceRepository.listReferences) as one statement each: `referencePage` gives what
 * follows SELECT's column list (alias `r` for shipping_references), in page order, newest first (ids are UUIDv7).
 * The tags of each row are read from its own `tag_list` (src/store/sql/tag-lists.ts): a page costs the same
 * whatever its rows carry. The listed tags, to include and to exclude, are resolved inside the statement (ids and
 * name keys of the organization).
 *
 * A client chooses how many tags it lists: lists are bound as one parameter each (value-lists.ts), so that a
 * filter's statement has one text whatever their lengths (issue 34). Only a `tag_match=any` page of at most
 * MAX_MERGED_TAG_WALKS tags has a text per number of tags, a few dozen texts in all.
 */

/** The column filters of a reference listing, on the alias `r`. */
function referenceConditions(query: ReferenceListQuery): Prisma.Sql[] {
  const conditions: Prisma.Sql[] = [];
  if (query.active !== undefined) conditions.push(Prisma.sql`r."active" = ${query.active}`);
  if (query.carrierCode !== undefined) conditions.push(Prisma.sql`r."carrier_code" = ${query.carrierCode}`);
  if (query.containerId !== undefined) conditions.push(Prisma.sql`r."container_id" = ${query.containerId}`);
  if (query.billOfLading !== undefined) conditions.push(Prisma.sql`r."bill_of_lading" = ${query.billOfLading}`);
  if (query.bookingNumber !== undefined) conditions.push(Prisma.sql`r."booking_number" = ${query.bookingNumber}`);
  if (query.parentReferenceId !== undefined) {
    conditions.push(Prisma.sql`r."parent_reference_id" = ${query.parentReferenceId}`);
  }
  return conditions;
}

/** FROM, WHERE, ORDER BY and LIMIT of a page of references (alias `r`). */
export function referencePage(
  provider: DatabaseProvider,
  organizationId: string,
  query: ReferenceListQuery,
): Prisma.Sql {
  if (!query.tags) {
    // Without a tag to include, walk the organization's references newest first (the (organization_id, id)
    // index) and drop each that carries an excluded tag: a NOT EXISTS probe of the (reference_id, tag_id)
    // primary key.
    const conditions = [Prisma.sql`r."organization_id" = ${organizationId}`, ...referenceConditions(query)];
    if (query.excludedTags) {
      conditions.push(carriesNone(provider, organizationId, Prisma.sql`r."id"`, query.excludedTags));
    }
    if (query.beforeId) conditions.push(Prisma.sql`r."id" < ${query.beforeId}`);
    return Prisma.sql`
      FROM "shipping_references" r WHERE ${Prisma.join(conditions, " AND ")}
      ORDER BY r."id" DESC LIMIT ${literalLimit(query.limit)}`;
  }
  // With a tag filter, walk the (tag_id, reference_id) index of a listed tag newest first and check the rest per
  // candidate. Walking all references newest first and probing each one's tags would take about 33,000 probes to
  // find 50 carriers of a tag held by 0.15 % of 100,000 references.
  return Prisma.sql`
    FROM (${carriersOfListedTags(provider, organizationId, query, query.tags)}) AS page
    JOIN "shipping_references" r ON r."id" = page."reference_id"
    ORDER BY r."id" DESC`;
}

/**
 * The ids of a page of references as a SELECT of one column, `id`, newest first: the rows `referencePage` gives,
 * without reading the references' rows where the filter does not need them.
 */
export function referencePageIds(
  provider: DatabaseProvider,
  organizationId: string,
  query: ReferenceListQuery,
): Prisma.Sql {
  if (!query.tags) return Prisma.sql`SELECT r."id" ${referencePage(provider, organizationId, query)}`;
  return Prisma.sql`
    SELECT "reference_id" AS "id" FROM (${carriersOfListedTags(provider, organizationId, query, query.tags)}) AS "page"
    ORDER BY "reference_id" DESC`;
}

/** The page's ids (column `reference_id`, newest first) when it is filtered by tags: `referenceIdsByTags`. */
function carriersOfListedTags(
  provider: DatabaseProvider,
  organizationId: string,
  query: ReferenceListQuery,
  tags: ReferenceTagFilter,
): Prisma.Sql {
  const candidate = query.excludedTags
    ? [carriesNone(provider, organizationId, Prisma.sql`rt."reference_id"`, query.excludedTags)]
    : [];
  const columns = referenceConditions(query);
  return referenceIdsByTags(provider, organizationId, tags, query.beforeId, candidate, columns, query.limit);
}

/**
 * The page of reference ids (column `reference_id`, newest first) carrying the filter's tags. A listed tag's
 * links belong to its organization's references, so a walk of links alone stays in the organization; it joins the
 * reference's row only to check column filters. There, CROSS JOIN is SQLite's way to fix the join order
 * (reference_tags outside): left to itself, its planner scanned the organization's references first (113 ms
 * instead of 0.2 ms on 100,000 references). PostgreSQL plans a CROSS JOIN with a join condition like any inner join.
 */
function referenceIdsByTags(
  provider: DatabaseProvider,
  organizationId: string,
  filter: ReferenceTagFilter,
  beforeId: string | undefined,
  candidateConditions: readonly Prisma.Sql[],
  columnConditions: readonly Prisma.Sql[],
  limit: number,
): Prisma.Sql {
  const tagOf = (entry: { id?: string; nameKey?: string }) =>
    entry.id !== undefined
      ? Prisma.sql`(SELECT t."id" FROM "tags" t WHERE t."organization_id" = ${organizationId} AND t."id" = ${entry.id})`
      : Prisma.sql`(SELECT t."id" FROM "tags" t WHERE t."organization_id" = ${organizationId} AND t."name_key" = ${entry.nameKey})`;
  const entries = [...filter.ids.map((id) => ({ id })), ...filter.nameKeys.map((nameKey) => ({ nameKey }))];
  const conditions: Prisma.Sql[] = [...candidateConditions];
  const links =
    columnConditions.length === 0
      ? Prisma.sql`"reference_tags" rt`
      : Prisma.sql`"reference_tags" rt CROSS JOIN "shipping_references" r`;
  if (columnConditions.length > 0) {
    conditions.push(
      Prisma.sql`r."id" = rt."reference_id"`,
      Prisma.sql`r."organization_id" = ${organizationId}`,
      ...columnConditions,
    );
  }
  if (beforeId) conditions.push(Prisma.sql`rt."reference_id" < ${beforeId}`);
  const where = (more: Prisma.Sql) => Prisma.join([...conditions, more], " AND ");
  if (filter.match === "any" && entries.length > MAX_MERGED_TAG_WALKS) {
    return Prisma.sql`
      SELECT DISTINCT rt."reference_id" FROM ${links}
      WHERE ${where(Prisma.sql`rt."tag_id" IN (${tagsOf(provider, organizationId, filter)})`)}
      ORDER BY rt."reference_id" DESC LIMIT ${literalLimit(limit)}`;
  }
  if (filter.match === "any") {
    // The first `limit` carriers of any listed tag are among the first `limit` carriers of each: walk each
    // tag's (tag_id, reference_id) index newest first for its own first `limit` (conditions checked on the
    // way), then merge. Reading every carrier of every listed tag and sorting them, as one IN list does, cost
    // PostgreSQL 0.8–1 ms for two tags of 150 carriers each against 0.2 ms here (docs/decisions.md).
    const walks = entries.map(
      (entry, index) => Prisma.sql`SELECT "reference_id" FROM (
        SELECT rt."reference_id" FROM ${links} WHERE ${where(Prisma.sql`rt."tag_id" = ${tagOf(entry)}`)}
        ORDER BY rt."reference_id" DESC LIMIT ${literalLimit(limit)}) AS ${Prisma.raw(`"walk_${index}"`)}`,
    );
    // UNION with the page's order and limit: SQLite merges the walks as they come (MERGE (UNION)) instead of
    // collecting them all in a temporary B-tree for DISTINCT and sorting them again.
    return Prisma.sql`${Prisma.join(walks, " UNION ")} ORDER BY "reference_id" DESC LIMIT ${literalLimit(limit)}`;
  }
  // `all`: the first listed tag drives the walk; the candidate must carry each other one: no other listed id or
  // name lacks a link on it (a probe of the (reference_id, tag_id) key per listed tag). A listed tag that does
  // not exist makes the first one's subquery NULL, or finds no link, so nothing matches, as the contract says.
  const [first] = entries;
  const drivenById = filter.ids.length > 0;
  const otherIds = filter.ids.slice(drivenById ? 1 : 0);
  const otherNameKeys = filter.nameKeys.slice(drivenById ? 0 : 1);
  const all: Prisma.Sql[] = [Prisma.sql`rt."tag_id" = ${tagOf(first!)}`];
  if (otherIds.length > 0) {
    all.push(Prisma.sql`NOT EXISTS (
      SELECT 1 FROM ${valueTable(provider, otherIds)} WHERE NOT EXISTS (
        SELECT 1 FROM "reference_tags" other
        WHERE other."reference_id" = rt."reference_id" AND other."tag_id" = "listed"."value"))`);
  }
  if (otherNameKeys.length > 0) {
    all.push(Prisma.sql`NOT EXISTS (
      SELECT 1 FROM ${valueTable(provider, otherNameKeys)} WHERE NOT EXISTS (
        SELECT 1 FROM "reference_tags" other JOIN "tags" t ON t."id" = other."tag_id"
        WHERE other."reference_id" = rt."reference_id" AND t."organization_id" = ${organizationId}
          AND t."name_key" = "listed"."value"))`);
  }
  return Prisma.sql`
    SELECT rt."reference_id" FROM ${links} WHERE ${where(Prisma.join(all, " AND "))}
    ORDER BY rt."reference_id" DESC LIMIT ${literalLimit(limit)}`;
}

/**
 * The most listed tags whose carriers a `tag_match=any` page reads as one newest-first walk per tag; past this
 * many, one walk of all their carriers together (the statement would grow with every walk).
 */
const MAX_MERGED_TAG_WALKS = 8;

/** A subquery giving the ids of the organization's tags listed by id or by name key; unknown ones give none. */
function tagsOf(provider: DatabaseProvider, organizationId: string, listed: ListedTags): Prisma.Sql {
  return Prisma.sql`
    SELECT t."id" FROM "tags" t WHERE t."organization_id" = ${organizationId} AND ${isListed(provider, "t", listed)}`;
}

/**
 * The reference `referenceId` carries none of the excluded tags, resolved in the same statement (ids and name
 * keys of the organization): a probe of the (reference_id, tag_id) key joined to the tag's primary key.
 */
function carriesNone(
  provider: DatabaseProvider,
  organizationId: string,
  referenceId: Prisma.Sql,
  excluded: ListedTags,
): Prisma.Sql {
  return Prisma.sql`NOT EXISTS (
    SELECT 1 FROM "reference_tags" excluded JOIN "tags" et ON et."id" = excluded."tag_id"
    WHERE excluded."reference_id" = ${referenceId} AND et."organization_id" = ${organizationId}
      AND ${isListed(provider, "et", excluded)})`;
}

/** The tag aliased `alias` is one of those listed by id or by name key (at least one id or name key is given). */
function isListed(provider: DatabaseProvider, alias: string, listed: ListedTags): Prisma.Sql {
  const tag = Prisma.raw(`"${alias}"`);
  const byId = listed.ids.length > 0 ? isOneOf(provider, Prisma.sql`${tag}."id"`, listed.ids) : null;
  const byName = listed.nameKeys.length > 0 ? isOneOf(provider, Prisma.sql`${tag}."name_key"`, listed.nameKeys) : null;
  return Prisma.sql`(${Prisma.join(
    [byId, byName].filter((part): part is Prisma.Sql => part !== null),
    " OR ",
  )})`;
}
