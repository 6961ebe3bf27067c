import type { Reference } from "../models.ts";
import type { ReferenceListQuery } from "./reference-repository.ts";
import { DomainError, validationFailed, type FieldIssue } from "../shared/errors.ts";
import { isUuid } from "../shared/ids.ts";
import { tagNameKey } from "../tags/tag-name.ts";
import { checkContainerNumber, normalizeContainerNumber } from "./container-number.ts";

/*
 * The inputs of the reference service, checked: raw values from either surface become a reference's identity,
 * a listing's canonical filters, or a report's container numbers, or a VALIDATION_FAILED /
 * INVALID_QUERY_PARAMETER error listing every problem. Nothing here reads or writes the database.
 */

/**
 * How many `tagIds` and `tagNames` one listing may filter by, together; and, separately, how many
 * `excludeTagIds` and `excludeTagNames`.
 */
export const MAX_TAG_FILTER_VALUES = 100;

/** Raw input from either surface; the service validates every field. */
export interface CreateReferenceInput {
  readonly containerId?: unknown;
  readonly billOfLading?: unknown;
  readonly bookingNumber?: unknown;
  readonly carrierCode?: unknown;
  readonly tags?: unknown;
}

export interface ListReferencesInput {
  readonly tagIds?: readonly string[];
  readonly tagNames?: readonly string[];
  readonly tagMatch?: "all" | "any";
  /** References carrying any of these tags are left out; unknown ids and names exclude nothing. */
  readonly excludeTagIds?: readonly string[];
  readonly excludeTagNames?: readonly string[];
  readonly active?: boolean;
  readonly carrierCode?: string;
  readonly containerId?: string;
  readonly billOfLading?: string;
  readonly bookingNumber?: string;
  readonly parentReferenceId?: string;
  readonly limit: number;
  readonly cursor?: string;
}

const SCAC = /^[A-Za-z]{2,4}$/;
const MAX_DOCUMENT_NUMBER_LENGTH = 64;
/** One report of the containers on a bill of lading or booking: checked here, for REST and GraphQL alike. */
const MAX_CHILD_CONTAINERS_PER_REPORT = 500;

export type ReferencePosition = { readonly i: string };
export const isReferencePosition = (value: unknown): value is ReferencePosition =>
  typeof value === "object" && value !== null && isUuid((value as ReferencePosition).i);

/** What identifies a new reference: exactly one of the three numbers, and its carrier. */
export type ReferenceIdentity = Pick<Reference, "containerId" | "billOfLading" | "bookingNumber" | "carrierCode">;

/** Checks the identifier and carrier of a new reference; adds one issue per bad field to `issues`. */
export function parseReferenceIdentity(input: CreateReferenceInput, issues: FieldIssue[]): ReferenceIdentity {
  const identifiers = (["containerId", "billOfLading", "bookingNumber"] as const).filter(
    (key) => input[key] !== undefined && input[key] !== null,
  );
  if (identifiers.length !== 1) {
    issues.push({
      path: identifiers.length === 0 ? [] : [identifiers[1]!],
      code: "ONE_OF",
      message: "give exactly one of {containerId}, {billOfLading} or {bookingNumber}",
    });
  }
  let containerId: string | null = null;
  let billOfLading: string | null = null;
  let bookingNumber: string | null = null;
  if (identifiers.length === 1) {
    const key = identifiers[0]!;
    const value = input[key];
    if (typeof value !== "string") {
      issues.push({ path: [key], code: "INVALID_TYPE", message: "must be a string" });
    } else if (key === "containerId") {
      const checked = checkContainerNumber(value);
      if (checked.ok) containerId = checked.value;
      else issues.push({ path: [key], code: checked.code, message: checked.message });
    } else {
      const number = checkDocumentNumber(value);
      if (number === null) {
        issues.push({
          path: [key],
          code: "INVALID_FORMAT",
          message: `must be 1 to ${MAX_DOCUMENT_NUMBER_LENGTH} letters, digits or dashes`,
        });
      } else if (key === "billOfLading") billOfLading = number;
      else bookingNumber = number;
    }
  }
  const carrierCode = checkCarrierCode(input.carrierCode, issues);
  return { containerId, billOfLading, bookingNumber, carrierCode };
}

/**
 * The canonical filters of a listing (see {@link referenceFilters}).
 * @throws INVALID_QUERY_PARAMETER for a malformed id or too many tag filter values.
 */
export function parseReferenceListing(input: ListReferencesInput): ReferenceFilters {
  const issues: FieldIssue[] = [];
  const tagIds = (input.tagIds ?? []).map((id) => id.toLowerCase());
  tagIds.forEach((id, index) => {
    if (!isUuid(id)) issues.push({ path: ["tagIds", index], code: "INVALID_ID", message: `"${id}" is not an id` });
  });
  const tagFilterValues = tagIds.length + (input.tagNames?.length ?? 0);
  if (tagFilterValues > MAX_TAG_FILTER_VALUES) {
    issues.push({
      path: [tagIds.length > 0 ? "tagIds" : "tagNames"],
      code: "TOO_MANY_VALUES",
      message: `at most ${MAX_TAG_FILTER_VALUES} tag ids and names together (${tagFilterValues} given)`,
    });
  }
  const excludeTagIds = (input.excludeTagIds ?? []).map((id) => id.toLowerCase());
  excludeTagIds.forEach((id, index) => {
    if (!isUuid(id))
      issues.push({ path: ["excludeTagIds", index], code: "INVALID_ID", message: `"${id}" is not an id` });
  });
  // Exclusions are looked up the same way as inclusions, so they are bounded the same way before the database.
  const excludedFilterValues = excludeTagIds.length + (input.excludeTagNames?.length ?? 0);
  if (excludedFilterValues > MAX_TAG_FILTER_VALUES) {
    issues.push({
      path: [excludeTagIds.length > 0 ? "excludeTagIds" : "excludeTagNames"],
      code: "TOO_MANY_VALUES",
      message: `at most ${MAX_TAG_FILTER_VALUES} tag ids and names to exclude together (${excludedFilterValues} given)`,
    });
  }
  if (input.parentReferenceId !== undefined && !isUuid(input.parentReferenceId)) {
    issues.push({ path: ["parentReferenceId"], code: "INVALID_ID", message: "not an id" });
  }
  if (issues.length > 0) {
    throw new DomainError("INVALID_QUERY_PARAMETER", issues[0]!.message, issues);
  }
  return referenceFilters({ ...input, tagIds, excludeTagIds });
}

/**
 * The container numbers of one report of a bill of lading's or booking's containers, normalized, in input order.
 * @throws VALIDATION_FAILED (not a non-empty array, bad numbers), LIMIT_EXCEEDED (too many in one report).
 */
export function parseChildContainerNumbers(containerIds: unknown): string[] {
  if (!Array.isArray(containerIds) || containerIds.length === 0) {
    throw validationFailed([
      { path: ["containerIds"], code: "REQUIRED", message: "{containerIds} must be a non-empty array" },
    ]);
  }
  if (containerIds.length > MAX_CHILD_CONTAINERS_PER_REPORT) {
    const message = `at most ${MAX_CHILD_CONTAINERS_PER_REPORT} container numbers per report`;
    throw new DomainError("LIMIT_EXCEEDED", message, [{ path: ["containerIds"], code: "LIMIT_EXCEEDED", message }], {
      limit: MAX_CHILD_CONTAINERS_PER_REPORT,
    });
  }
  const issues: FieldIssue[] = [];
  const numbers: string[] = [];
  containerIds.forEach((raw: unknown, index) => {
    const checked = typeof raw === "string" ? checkContainerNumber(raw) : null;
    if (checked?.ok) numbers.push(checked.value);
    else
      issues.push({
        path: ["containerIds", index],
        code: checked?.code ?? "INVALID_TYPE",
        message: checked?.message ?? "must be a string",
      });
  });
  if (issues.length > 0) throw validationFailed(issues);
  return numbers;
}

export type ReferenceFilters = ReturnType<typeof referenceFilters>;

/**
 * The filters of a reference listing in canonical form: what the query uses and what a cursor's fingerprint
 * is computed from (so equal filters, however written, give interchangeable cursors).
 */
export function referenceFilters(input: ListReferencesInput & { readonly tagIds: readonly string[] }) {
  const nameKeys = (names: readonly string[] | undefined) =>
    [...new Set((names ?? []).map((name) => tagNameKey(name.trim().normalize("NFC"))))].sort();
  const excludeTagIds = [...new Set(input.excludeTagIds ?? [])].sort();
  const excludeTagNames = nameKeys(input.excludeTagNames);
  return {
    scope: "references",
    tagIds: [...new Set(input.tagIds)].sort(),
    tagNames: nameKeys(input.tagNames),
    tagMatch: input.tagMatch ?? "all",
    // Present only when given, so that cursors issued before exclusions existed stay valid.
    ...(excludeTagIds.length > 0 && { excludeTagIds }),
    ...(excludeTagNames.length > 0 && { excludeTagNames }),
    active: input.active,
    carrierCode: input.carrierCode?.toUpperCase(),
    containerId: input.containerId === undefined ? undefined : normalizeContainerNumber(input.containerId),
    billOfLading: input.billOfLading?.trim(),
    bookingNumber: input.bookingNumber?.trim(),
    parentReferenceId: input.parentReferenceId?.toLowerCase(),
  };
}

function checkCarrierCode(raw: unknown, issues: FieldIssue[]): string {
  if (typeof raw !== "string" || !SCAC.test(raw.trim())) {
    issues.push({
      path: ["carrierCode"],
      code: raw === undefined || raw === null ? "REQUIRED" : "INVALID_FORMAT",
      message: "{carrierCode} must be a 2 to 4 letter SCAC",
    });
    return "";
  }
  return raw.trim().toUpperCase();
}

function checkDocumentNumber(raw: string): string | null {
  const value = raw.trim().toUpperCase();
  return /^[A-Z0-9][A-Z0-9-]*$/.test(value) && value.length <= MAX_DOCUMENT_NUMBER_LENGTH ? value : null;
}

/**
 * The store's query for a listing. Tags to include and to exclude are resolved inside the listing's one
 * statement: unknown ids or names match nothing with `all`, and exclude nothing.
 */
export function referenceListQuery(
  filters: ReferenceFilters,
  beforeId: string | undefined,
  limit: number,
): ReferenceListQuery {
  const filtersTags = filters.tagIds.length + filters.tagNames.length > 0;
  const excludedIds = filters.excludeTagIds ?? [];
  const excludedNameKeys = filters.excludeTagNames ?? [];
  return {
    ...(filtersTags && {
      tags: { match: filters.tagMatch, ids: filters.tagIds, nameKeys: filters.tagNames },
    }),
    ...(excludedIds.length + excludedNameKeys.length > 0 && {
      excludedTags: { ids: excludedIds, nameKeys: excludedNameKeys },
    }),
    active: filters.active,
    carrierCode: filters.carrierCode,
    containerId: filters.containerId,
    billOfLading: filters.billOfLading,
    bookingNumber: filters.bookingNumber,
    parentReferenceId: filters.parentReferenceId,
    beforeId,
    limit,
  };
}

/** @throws LIMIT_EXCEEDED when a reference would carry more than `max` tags (`count`). */
export function assertTagCount(count: number, max: number): void {
  if (count > max) {
    throw new DomainError(
      "LIMIT_EXCEEDED",
      `A reference can carry at most ${max} tags (this request would give it ${count})`,
      [{ path: ["tags"], code: "LIMIT_EXCEEDED", message: `at most ${max} tags per reference` }],
      { limit: max },
    );
  }
}
