import type { FastifyInstance } from "fastify";
import type { TrustedDocument } from "../../domain/models.ts";
import type { Services } from "../../domain/services.ts";
import { callerOf, changeOf } from "../rest-api.ts";
import { BODY_PROBLEMS, problems, success } from "../response-schemas.ts";
import { pageQuery } from "../schemas.ts";

/*
 * The registry of trusted documents (src/domain/documents/): register a manifest, list, read one. The registry is
 * not part of the organization's data version, so these reads are never answered from the read cache.
 */

const tags = ["trusted-documents"];

export function serializeTrustedDocumentSummary(document: TrustedDocument) {
  return {
    document_id: document.documentId,
    operation_names: document.operationNames,
    created_at: document.createdAt.toISOString(),
  };
}

export function serializeTrustedDocument(document: TrustedDocument) {
  return { ...serializeTrustedDocumentSummary(document), document: document.document };
}

export function registerTrustedDocumentRoutes(app: FastifyInstance, services: Services): void {
  app.post<{ Body: Record<string, unknown> }>(
    "/trusted-documents",
    {
      schema: {
        tags,
        operationId: "registerTrustedDocuments",
        summary: "Register GraphQL documents (a persisted-documents.json manifest)",
        description:
          "The body is the manifest GraphQL Code Generator's client preset writes with `persistedDocuments` " +
          "(`persisted-documents.json`): an object from each document's SHA-256 (64 lower-case hex digits, or " +
          "`sha256:` and the digits) to the document's text. Idempotent: a document registered already is left as " +
          "it is. All or nothing: one bad entry (VALIDATION_FAILED with the entry's key as pointer: " +
          "INVALID_DOCUMENT_ID, DOCUMENT_ID_MISMATCH, INVALID_DOCUMENT) registers none. At most 5000 documents per " +
          "request (LIMIT_EXCEEDED). A trusted-documents-only key may not register documents (403 FORBIDDEN).",
        body: {
          type: "object",
          description: "document id (or its hex digits) → document text",
          additionalProperties: true,
        },
        response: {
          200: success("The manifest's documents as the registry holds them now", "TrustedDocumentRegistration"),
          ...problems(...BODY_PROBLEMS, 403),
        },
      },
    },
    async (request) => {
      const result = await services.trustedDocuments.registerDocuments(
        callerOf(request),
        request.body,
        changeOf(request),
      );
      return {
        registered: result.registered,
        already_registered: result.documents.length - result.registered,
        data: result.documents.map(serializeTrustedDocumentSummary),
      };
    },
  );

  app.get<{ Querystring: { limit: number; cursor?: string } }>(
    "/trusted-documents",
    {
      schema: {
        tags,
        operationId: "listTrustedDocuments",
        summary: "List the registered documents, oldest first, with their text",
        querystring: { type: "object", properties: { ...pageQuery } },
        response: { 200: success("A page of registered documents", "TrustedDocumentPage"), ...problems(400) },
      },
    },
    async (request) => {
      const page = await services.trustedDocuments.listDocuments(callerOf(request).organizationId, {
        limit: request.query.limit,
        cursor: request.query.cursor,
      });
      return { data: page.items.map(serializeTrustedDocument), next_cursor: page.nextCursor };
    },
  );

  app.get<{ Params: { documentId: string } }>(
    "/trusted-documents/:documentId",
    {
      schema: {
        tags,
        operationId: "getTrustedDocument",
        summary: "Read one registered document",
        params: {
          type: "object",
          properties: { documentId: { type: "string", description: "sha256:<64 lower-case hex digits>" } },
          required: ["documentId"],
        },
        response: { 200: success("The document", "TrustedDocument"), ...problems(404) },
      },
    },
    async (request) =>
      serializeTrustedDocument(
        await services.trustedDocuments.getDocument(callerOf(request).organizationId, request.params.documentId),
      ),
  );
}
