import type { EventDraft, LifecycleRecorder } from "../lifecycle/lifecycle-recorder.ts";
import type { DeactivateReason, LifecycleEvent } from "../lifecycle/lifecycle-event.ts";
import type { Reference, ReferenceUpdate, Tag } from "../models.ts";
import type { Clock } from "../shared/clock.ts";
import { DomainError, validationFailed, type FieldIssue } from "../shared/errors.ts";
import { isUuid, newId } from "../shared/ids.ts";
import type { Store } from "../store.ts";
import { parseExtractionOutcome, type ExtractionOutcome } from "./extraction-outcome.ts";
import {
  deactivationChange,
  extractionChange,
  parseDeactivateReason,
  parseUpdateDocument,
  reactivationChange,
  updateChange,
  type EstimateChange,
  type TrackingChange,
} from "./tracking-rules.ts";
import { isJsonObject } from "../shared/json-input.ts";

/*
 * Bulk ingestion (issue 8): one request of the tracking side carrying up to MAX_INGESTION_ITEMS reports
 * about many references of one organization. Glossary:
 * - item: one report, `kind` being `extraction`, `update`, `deactivate` or `reactivate`, about `referenceId`;
 * - mode: `atomic` (the default) judges the request as a whole: one bad item rejects it and nothing is saved;
 *   `per_item` judges each item on its own, saves the good ones and answers a result per item.
 * Every item obeys the same rules (tracking-rules.ts) and validators as the single-item operations of
 * ReferenceService, so the same bad input gets the same code. Problem paths start at the request:
 * `["items", 17, "error", "code"]`.
 */

export const MAX_INGESTION_ITEMS = 500;
export const INGESTION_ITEM_KINDS = ["extraction", "update", "deactivate", "reactivate"] as const;
export type IngestionItemKind = (typeof INGESTION_ITEM_KINDS)[number];
export const INGESTION_MODES = ["atomic", "per_item"] as const;
export type IngestionMode = (typeof INGESTION_MODES)[number];

/** One item as either surface received it; the service validates every field. */
export interface IngestionItemInput {
  readonly kind?: unknown;
  readonly referenceId?: unknown;
  /** extraction */
  readonly status?: unknown;
  /** extraction, when failed */
  readonly error?: unknown;
  /** update: the document */
  readonly update?: unknown;
  /** deactivate */
  readonly reason?: unknown;
}

export interface IngestionInput {
  readonly items?: unknown;
  readonly mode?: unknown;
}

/** What one item did: the events it wrote (in log order) and, for an update, the stored update. */
export interface IngestedItem {
  readonly index: number;
  readonly ok: true;
  readonly referenceId: string;
  readonly events: readonly LifecycleEvent[];
  readonly update: ReferenceUpdate | null;
}

/** An item refused in `per_item` mode, with the error it would have got alone (paths from the request). */
export interface RefusedItem {
  readonly index: number;
  readonly ok: false;
  /** As given, when it was a string. */
  readonly referenceId: string | null;
  readonly error: DomainError;
}

export type IngestionItemResult = IngestedItem | RefusedItem;

export interface IngestionResult {
  readonly mode: IngestionMode;
  /** One result per item, in request order. */
  readonly items: readonly IngestionItemResult[];
  /** Items saved and items refused. */
  readonly succeeded: number;
  readonly failed: number;
  /** Every event the request wrote, change events included. */
  readonly eventCount: number;
}

export interface IngestionLimits {
  readonly extractionFailureThreshold: number;
}

/** An item whose fields passed validation; whether it applies depends on its reference's state. */
type ParsedItem = { readonly index: number; readonly referenceId: string } & (
  | { readonly kind: "extraction"; readonly outcome: ExtractionOutcome }
  | {
      readonly kind: "update";
      readonly document: Record<string, unknown>;
      readonly estimates: readonly EstimateChange[];
    }
  | { readonly kind: "deactivate"; readonly reason: DeactivateReason }
  | { readonly kind: "reactivate" }
);

/** The fields each kind takes besides `kind` and `referenceId`. */
const FIELDS_OF_KIND: Readonly<Record<IngestionItemKind, readonly string[]>> = {
  extraction: ["status", "error"],
  update: ["update"],
  deactivate: ["reason"],
  reactivate: [],
};
const ITEM_FIELDS = ["kind", "referenceId", "status", "error", "update", "reason"] as const;

export class IngestionService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly recorder: LifecycleRecorder,
    private readonly limits: IngestionLimits,
  ) {}

  /**
   * Applies the items in request order (items about one reference see each other's effects), in one transaction
   * that locks every reference named (in id order) and writes events, snapshots, outbox rows, updates and
   * reference states set-wise.
   * - `atomic`: every problem with the items' fields is reported at once (VALIDATION_FAILED, one issue each);
   *   otherwise the first item that cannot apply (NOT_FOUND: an unknown or malformed reference id; CONFLICT:
   *   reactivating an active reference) rejects the request. Either way nothing is saved.
   * - `per_item`: a refused item is listed with its error; the others are saved.
   * @throws VALIDATION_FAILED (`items` missing, empty or not a list; an unknown `mode`), LIMIT_EXCEEDED (more
   *         than MAX_INGESTION_ITEMS items, checked before the database is touched); in `atomic` mode also
   *         VALIDATION_FAILED, NOT_FOUND and CONFLICT for an item, with its path.
   */
  async ingest(organizationId: string, input: IngestionInput): Promise<IngestionResult> {
    const mode = parseMode(input.mode);
    const rawItems = checkItemList(input.items);
    const parsed: ParsedItem[] = [];
    const refused = new Map<number, RefusedItem>();
    rawItems.forEach((raw, index) => {
      try {
        parsed.push(parseItem(raw, index));
      } catch (error) {
        if (!(error instanceof DomainError)) throw error;
        refused.set(index, { index, ok: false, referenceId: referenceIdOf(raw), error });
      }
    });
    if (mode === "atomic" && refused.size > 0) {
      throw validationFailed([...refused.values()].flatMap((item) => item.error.issues));
    }

    const applied = await this.store.transaction(async (store) => {
      // This run's refusals: a unit may run again (Store.transaction), and what it refused then is decided anew.
      const refusedInUnit = new Map<number, RefusedItem>();
      const ids = [...new Set(parsed.map((item) => item.referenceId).filter(isUuid))];
      const tagsByReference = new Map<string, readonly Tag[]>();
      const current = new Map<string, Reference>();
      for (const { tags, ...reference } of await store.references.lockReferences(organizationId, ids)) {
        tagsByReference.set(reference.id, tags);
        current.set(reference.id, reference);
      }
      const now = this.clock.now();
      const changes: { item: ParsedItem; change: TrackingChange }[] = [];
      for (const item of parsed) {
        const reference = current.get(item.referenceId);
        try {
          if (!reference) throw itemError("NOT_FOUND", "reference not found", ["referenceId"]);
          const change = this.changeOf(item, reference, now);
          current.set(reference.id, change.reference);
          changes.push({ item, change });
        } catch (error) {
          if (!(error instanceof DomainError)) throw error;
          const located = locate(error, item.index);
          if (mode === "atomic") throw located;
          refusedInUnit.set(item.index, {
            index: item.index,
            ok: false,
            referenceId: item.referenceId,
            error: located,
          });
        }
      }

      const changed = changes.filter(({ change }) => change.events.length > 0);
      const drafts: EventDraft[] = changed.flatMap(({ change }) =>
        change.events.map((body) => ({
          reference: change.reference,
          tags: tagsByReference.get(change.reference.id) ?? [],
          body,
        })),
      );
      const updates = changed.flatMap(({ change }) => (change.update ? [change.update] : []));
      // Each reference's last state: a later item's change builds on the earlier ones'.
      const finalStates = new Map(
        changed.map(({ change }) => [change.reference.id, current.get(change.reference.id)!]),
      );
      if (updates.length > 0) await store.references.insertReferenceUpdates(updates);
      if (finalStates.size > 0) await store.references.updateReferences([...finalStates.values()]);
      const events = await this.recorder.recordAll(store, drafts);
      return { changes, events, refused: refusedInUnit };
    });
    for (const [index, item] of applied.refused) refused.set(index, item);

    // Hand each item its events: they were recorded in item order.
    const results: IngestionItemResult[] = [];
    let next = 0;
    const ingested = new Map<number, IngestedItem>();
    for (const { item, change } of applied.changes) {
      const events = applied.events.slice(next, next + change.events.length);
      next += change.events.length;
      ingested.set(item.index, {
        index: item.index,
        ok: true,
        referenceId: item.referenceId,
        events,
        update: change.update ?? null,
      });
    }
    for (let index = 0; index < rawItems.length; index++) results.push(ingested.get(index) ?? refused.get(index)!);
    return {
      mode,
      items: results,
      succeeded: ingested.size,
      failed: refused.size,
      eventCount: applied.events.length,
    };
  }

  private changeOf(item: ParsedItem, reference: Reference, now: Date): TrackingChange {
    switch (item.kind) {
      case "extraction":
        return extractionChange(reference, item.outcome, now, this.limits.extractionFailureThreshold);
      case "update":
        return updateChange(reference, item.document, item.estimates, newId(), now);
      case "deactivate":
        return deactivationChange(reference, item.reason, false, now);
      case "reactivate":
        return reactivationChange(reference, now);
    }
  }
}

function parseMode(raw: unknown): IngestionMode {
  if (raw === undefined || raw === null) return "atomic";
  if (typeof raw === "string" && (INGESTION_MODES as readonly string[]).includes(raw)) return raw as IngestionMode;
  throw validationFailed([
    { path: ["mode"], code: "INVALID_ENUM", message: `mode must be one of ${INGESTION_MODES.join(", ")}` },
  ]);
}

function checkItemList(raw: unknown): readonly unknown[] {
  if (!Array.isArray(raw) || raw.length === 0) {
    throw validationFailed([
      { path: ["items"], code: "REQUIRED", message: `{items} must be a list of 1 to ${MAX_INGESTION_ITEMS} items` },
    ]);
  }
  if (raw.length > MAX_INGESTION_ITEMS) {
    const message = `at most ${MAX_INGESTION_ITEMS} items per request (${raw.length} given)`;
    throw new DomainError("LIMIT_EXCEEDED", message, [{ path: ["items"], code: "LIMIT_EXCEEDED", message }], {
      limit: MAX_INGESTION_ITEMS,
    });
  }
  return raw;
}

function referenceIdOf(raw: unknown): string | null {
  const id = isJsonObject(raw) ? raw.referenceId : undefined;
  return typeof id === "string" ? id : null;
}

/**
 * Validates one item's fields with the single-item operations' own validators.
 * @throws VALIDATION_FAILED with paths from the request (`["items", index, ...]`).
 */
function parseItem(raw: unknown, index: number): ParsedItem {
  if (!isJsonObject(raw)) {
    throw validationFailed([{ path: ["items", index], code: "INVALID_TYPE", message: "an item must be an object" }]);
  }
  const item = raw as IngestionItemInput;
  const issues: FieldIssue[] = [];
  const kind = item.kind;
  if (typeof kind !== "string" || !(INGESTION_ITEM_KINDS as readonly string[]).includes(kind)) {
    issues.push({
      path: ["items", index, "kind"],
      code: kind === undefined || kind === null ? "REQUIRED" : "INVALID_ENUM",
      message: `kind must be one of ${INGESTION_ITEM_KINDS.join(", ")}`,
    });
  }
  if (typeof item.referenceId !== "string") {
    issues.push({
      path: ["items", index, "referenceId"],
      code: item.referenceId === undefined || item.referenceId === null ? "REQUIRED" : "INVALID_TYPE",
      message: "{referenceId} must be a reference id",
    });
  }
  if (issues.length > 0) throw validationFailed(issues);
  const known = kind as IngestionItemKind;
  for (const field of ITEM_FIELDS) {
    if (field === "kind" || field === "referenceId" || FIELDS_OF_KIND[known].includes(field)) continue;
    if (item[field] !== undefined && item[field] !== null) {
      issues.push({
        path: ["items", index, field],
        code: "NOT_ALLOWED",
        message: `${field} is not part of a ${known} item`,
      });
    }
  }
  if (issues.length > 0) throw validationFailed(issues);
  // A malformed id names no reference: NOT_FOUND when the item is applied, as on the single-item paths.
  const referenceId = (item.referenceId as string).toLowerCase();
  try {
    switch (known) {
      case "extraction":
        if (item.status === undefined || item.status === null) {
          throw validationFailed([{ path: ["status"], code: "REQUIRED", message: "status is required" }]);
        }
        return {
          index,
          referenceId,
          kind: known,
          outcome: parseExtractionOutcome({ status: item.status, error: item.error }),
        };
      case "update": {
        if (item.update === undefined || item.update === null) {
          throw validationFailed([{ path: ["update"], code: "REQUIRED", message: "update is required" }]);
        }
        if (!isJsonObject(item.update)) {
          throw validationFailed([{ path: ["update"], code: "INVALID_TYPE", message: "update must be a JSON object" }]);
        }
        const document = item.update;
        return {
          index,
          referenceId,
          kind: known,
          document,
          estimates: locateIn(["update"], () => parseUpdateDocument(document)),
        };
      }
      case "deactivate":
        if (item.reason === undefined || item.reason === null) {
          throw validationFailed([{ path: ["reason"], code: "REQUIRED", message: "reason is required" }]);
        }
        return { index, referenceId, kind: known, reason: parseDeactivateReason(item.reason) };
      case "reactivate":
        return { index, referenceId, kind: known };
    }
  } catch (error) {
    if (error instanceof DomainError) throw locate(error, index);
    throw error;
  }
}

/** Runs `parse`, whose paths are relative to `prefix`, giving paths relative to the item. */
function locateIn<T>(prefix: readonly (string | number)[], parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    throw withPaths(error, (path) => [...prefix, ...path]);
  }
}

/**
 * An item's error with its paths made relative to the request (`["items", index, ...]`). An error about the
 * item as a whole (CONFLICT) gets one issue pointing at the item, so that every refusal says where it is.
 */
function locate(error: DomainError, index: number): DomainError {
  const located =
    error.issues.length > 0
      ? error
      : new DomainError(
          error.code,
          error.message,
          [{ path: [], code: error.code, message: error.message }],
          error.meta,
        );
  return withPaths(located, (path) => ["items", index, ...path]);
}

function withPaths(
  error: DomainError,
  move: (path: readonly (string | number)[]) => readonly (string | number)[],
): DomainError {
  const issues = error.issues.map((issue) => ({ ...issue, path: move(issue.path) }));
  if (error.code === "VALIDATION_FAILED") return validationFailed(issues);
  return new DomainError(error.code, error.message, issues, error.meta);
}

/** An error about one field of an item (its path relative to the item), which a single-item path has no need to name. */
function itemError(code: "NOT_FOUND", message: string, path: readonly (string | number)[]): DomainError {
  return new DomainError(code, message, [{ path, code, message }]);
}
