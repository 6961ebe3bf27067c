import { dateTime, page, record } from "./response-schema-parts.ts";

/* The trusted-document components of the /v1 response schemas (routes/trusted-documents.routes.ts). */

const summaryProperties = {
  document_id: {
    type: "string",
    description: "`sha256:` and the 64 lower-case hex digits of the SHA-256 of the document's text",
  },
  operation_names: {
    type: "array",
    items: { type: ["string", "null"] },
    description: "The document's operation names, in document order; null for an anonymous operation",
  },
  created_at: { ...dateTime, description: "When the document was first registered" },
};

export const TRUSTED_DOCUMENT_SCHEMAS = [
  { $id: "TrustedDocumentSummary", ...record("A registered GraphQL document, without its text", summaryProperties) },
  {
    $id: "TrustedDocument",
    ...record("A registered GraphQL document: send its `document_id` instead of its text", {
      ...summaryProperties,
      document: { type: "string", description: "The document's text, exactly as registered" },
    }),
  },
  { $id: "TrustedDocumentPage", ...page("A page of registered documents, oldest first", "TrustedDocument") },
  {
    $id: "TrustedDocumentRegistration",
    ...record("What a registration did", {
      registered: { type: "integer", description: "Documents this request added" },
      already_registered: { type: "integer", description: "Documents of the manifest registered before" },
      data: {
        type: "array",
        items: { $ref: "TrustedDocumentSummary#" },
        description: "Every document of the manifest, in manifest order",
      },
    }),
  },
] as const;
