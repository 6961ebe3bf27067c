import { CLI_CHANGE, type ChangeContext } from "../audit/audit-event.ts";
import type { AuditLogService } from "../audit/audit-log-service.ts";
import { LRUCache } from "lru-cache";
import type { Clock } from "../shared/clock.ts";
import type { CursorCodec } from "../shared/cursor.ts";
import { DomainError, notFound, validationFailed, type FieldIssue } from "../shared/errors.ts";
import { isUuid } from "../shared/ids.ts";
import { pageOf, type Page } from "../shared/page.ts";
import type { TrustedDocument } from "../models.ts";
import type { Store } from "../store.ts";
import { documentIdOf, documentIdOfManifestKey, isDocumentId } from "./document-id.ts";

/*
 * The registry of trusted documents (glossary in document-id.ts). An organization registers the GraphQL documents
 * its clients send (the manifest GraphQL Code Generator's client preset writes, `persisted-documents.json`: an
 * object from hash to text); a GraphQL request may then name one by its id instead of sending its text, and an API
 * key marked trusted-documents-only may run no other (src/pipeline/trusted-documents/ applies that to every transport).
 */

/** Reads what the registry keeps about a document's text: the GraphQL parser, behind a port (src/pipeline/trusted-documents/). */
export interface DocumentReader {
  /** The document's operation names (null for an anonymous one), or why the text is not an executable document. */
  operationNames(text: string): { readonly names: readonly (string | null)[] } | { readonly problem: string };
}

/** Who registers: an API key (its organization, and whether it is trusted-documents-only), or the `reftrail` command. */
export interface Registrant {
  readonly organizationId: string;
  readonly trustedDocumentsOnly: boolean;
}

export interface RegistrationResult {
  /** Every document of the manifest, in manifest order, as the registry holds it now. */
  readonly documents: readonly TrustedDocument[];
  /** How many of them this call added (the others were registered already). */
  readonly registered: number;
}

export interface ListTrustedDocumentsInput {
  readonly limit: number;
  readonly cursor?: string;
}

/** Documents one registration may carry (one statement writes them). */
export const MAX_DOCUMENTS_PER_REGISTRATION = 5000;

export interface TrustedDocumentLimits {
  /**
   * Documents one organization may hold in all (MAX_TRUSTED_DOCUMENTS_PER_ORGANIZATION, default 20,000; issue 49.3:
   * nothing bounded it, and one organization had stored 75,002). A client's manifest holds its operations, a few
   * hundred for a large application; documents are kept (an id is its text's hash), so each release adds its new
   * operations to the ones before.
   */
  readonly maxDocumentsPerOrganization: number;
}
/** Bytes of document text the resolution cache keeps at most (the texts of one instance's busiest documents). */
const RESOLVED_TEXT_CACHE_BYTES = 16 * 1024 * 1024;

type ListPosition = { readonly t: number; readonly d: string };
const isListPosition = (value: unknown): value is ListPosition =>
  typeof value === "object" &&
  value !== null &&
  Number.isSafeInteger((value as ListPosition).t) &&
  isDocumentId((value as ListPosition).d);

export class TrustedDocumentService {
  /**
   * Texts found by id, per organization. Exact for as long as it is kept: a document is never changed nor removed,
   * and the id is the hash of the text. Unknown ids are not remembered (another instance may register them).
   */
  private readonly resolved = new LRUCache<string, string>({
    maxSize: RESOLVED_TEXT_CACHE_BYTES,
    sizeCalculation: (text, key) => text.length + key.length,
  });

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly cursors: CursorCodec,
    private readonly reader: DocumentReader,
    /** Records registrations in their transaction. */
    private readonly audit: AuditLogService,
    private readonly limits: TrustedDocumentLimits,
  ) {}

  /**
   * Registers every document of `manifest` (an object from document id, or its bare hex digits, to the document's
   * text) for the registrant's organization. Idempotent: a document registered already stays as it is, also when
   * two registrations of it run at once. All or nothing: a manifest with one bad entry registers none.
   * @throws FORBIDDEN when the registrant is a trusted-documents-only key (it may not widen what it may run),
   *         NOT_FOUND for an unknown organization, VALIDATION_FAILED for a manifest that is not an object of
   *         documents, an entry whose key is not a SHA-256 document id (`INVALID_DOCUMENT_ID`), whose key is not the
   *         hash of its text (`DOCUMENT_ID_MISMATCH`) or whose text is not a GraphQL executable document
   *         (`INVALID_DOCUMENT`); each issue's path is the entry's key. LIMIT_EXCEEDED beyond
   *         MAX_DOCUMENTS_PER_REGISTRATION documents.
   */
  async registerDocuments(
    registrant: Registrant,
    manifest: unknown,
    change: ChangeContext = CLI_CHANGE,
  ): Promise<RegistrationResult> {
    if (registrant.trustedDocumentsOnly) {
      throw new DomainError(
        "FORBIDDEN",
        "A trusted-documents-only API key may not register documents: register them with another key or the reftrail command",
      );
    }
    const entries = this.readManifest(manifest);
    const { organizationId } = registrant;
    if (!isUuid(organizationId) || !(await this.store.organizations.findOrganization(organizationId)))
      throw notFound("organization");
    const createdAt = this.clock.now();
    const ids = entries.map((entry) => entry.documentId);
    // The registration and its audit event in one transaction; a registration that adds nothing records nothing.
    const inserted = await this.store.transaction(async (store) => {
      // The bound is decided under the organization's lock (PostgreSQL; SQLite runs one writer at a time): two
      // registrations at once would otherwise both count what was there before either and both insert. The count
      // is sent with the lock and runs after it, on a snapshot that sees every registration committed before.
      const [, held] = await Promise.all([
        store.organizations.lockOrganization(organizationId),
        store.documents.countDocuments(organizationId),
      ]);
      const added = await store.documents.insertDocumentsIfAbsent(organizationId, createdAt, entries);
      const addedIds = [...new Set(added)];
      const max = this.limits.maxDocumentsPerOrganization;
      if (held + addedIds.length > max) {
        // Thrown inside the transaction: none of this manifest's documents stays.
        throw new DomainError(
          "LIMIT_EXCEEDED",
          `An organization holds at most ${max} trusted documents (${held} held, ${addedIds.length} new in this manifest)`,
          [],
          { limit: max },
        );
      }
      if (addedIds.length > 0)
        await this.audit.record(store, change, {
          organizationId,
          action: "trusted_documents.registered",
          target: { type: "trusted_documents", id: organizationId },
          changes: { document_ids: { from: null, to: addedIds } },
        });
      return added;
    });
    const held = new Map(
      (await this.store.documents.findDocuments(organizationId, ids)).map((document) => [
        document.documentId,
        document,
      ]),
    );
    const documents = ids.map((id) => {
      const document = held.get(id);
      // Rows are never removed, so every id written or found above is there.
      if (!document) throw new Error(`trusted document ${id} vanished after its registration`);
      return document;
    });
    return { documents, registered: new Set(inserted).size };
  }

  /** The organization's documents, oldest first. @throws INVALID_CURSOR, CURSOR_FILTER_MISMATCH. */
  async listDocuments(organizationId: string, input: ListTrustedDocumentsInput): Promise<Page<TrustedDocument>> {
    const filters = { scope: "trusted-documents" };
    const after = input.cursor ? this.cursors.decode(input.cursor, filters, isListPosition) : undefined;
    const rows = await this.store.documents.listDocuments(organizationId, {
      after: after && { createdAt: new Date(after.t), documentId: after.d },
      limit: input.limit + 1,
    });
    return pageOf(
      rows,
      input.limit,
      (document) =>
        this.cursors.encode<ListPosition>({ t: document.createdAt.getTime(), d: document.documentId }, filters),
      after !== undefined,
    );
  }

  /** One registered document. @throws NOT_FOUND (also for a malformed id). */
  async getDocument(organizationId: string, documentId: string): Promise<TrustedDocument> {
    const [document] = isDocumentId(documentId)
      ? await this.store.documents.findDocuments(organizationId, [documentId])
      : [];
    if (!document) throw notFound("trusted document");
    return document;
  }

  /**
   * The text of the organization's document `documentId`, or null when the organization registered none by that
   * id (or the id is malformed). Every request by id asks: a document found once is answered from memory after.
   */
  async findDocumentText(organizationId: string, documentId: string): Promise<string | null> {
    const key = `${organizationId} ${documentId}`;
    const known = this.resolved.get(key);
    if (known !== undefined) return known;
    if (!isDocumentId(documentId)) return null;
    const [document] = await this.store.documents.findDocuments(organizationId, [documentId]);
    if (!document) return null;
    this.resolved.set(key, document.document);
    return document.document;
  }

  /** Whether `text` is, byte for byte, a document the organization registered. */
  async isRegisteredText(organizationId: string, text: string): Promise<boolean> {
    return (await this.findDocumentText(organizationId, documentIdOf(text))) === text;
  }

  private readManifest(
    manifest: unknown,
  ): { documentId: string; document: string; operationNames: readonly (string | null)[] }[] {
    if (typeof manifest !== "object" || manifest === null || Array.isArray(manifest)) {
      throw validationFailed([
        { path: [], code: "INVALID_MANIFEST", message: "must be an object from document id to document text" },
      ]);
    }
    const keys = Object.keys(manifest);
    if (keys.length === 0) {
      throw validationFailed([{ path: [], code: "EMPTY_MANIFEST", message: "must hold at least one document" }]);
    }
    if (keys.length > MAX_DOCUMENTS_PER_REGISTRATION) {
      throw new DomainError(
        "LIMIT_EXCEEDED",
        `At most ${MAX_DOCUMENTS_PER_REGISTRATION} documents may be registered at once; split the manifest`,
        [],
        { limit: MAX_DOCUMENTS_PER_REGISTRATION },
      );
    }
    const issues: FieldIssue[] = [];
    const entries: { documentId: string; document: string; operationNames: readonly (string | null)[] }[] = [];
    const issue = (key: string, code: string, message: string) =>
      issues.push({ path: [key], code, message, documentKeys: 1 });
    for (const [key, text] of Object.entries(manifest as Record<string, unknown>)) {
      const documentId = documentIdOfManifestKey(key);
      if (documentId === null) {
        issue(key, "INVALID_DOCUMENT_ID", "must be a SHA-256 document id: sha256:<64 lower-case hex digits>");
        continue;
      }
      if (typeof text !== "string") {
        issue(key, "INVALID_DOCUMENT", "must be the document's text");
        continue;
      }
      if (documentIdOf(text) !== documentId) {
        issue(key, "DOCUMENT_ID_MISMATCH", "is not the SHA-256 of its document's text");
        continue;
      }
      const read = this.reader.operationNames(text);
      if ("problem" in read) {
        issue(key, "INVALID_DOCUMENT", `is not a GraphQL executable document: ${read.problem}`);
        continue;
      }
      // The same document under its bare and its prefixed key is one document.
      if (!entries.some((entry) => entry.documentId === documentId))
        entries.push({ documentId, document: text, operationNames: read.names });
    }
    if (issues.length > 0) throw validationFailed(issues);
    return entries;
  }
}
