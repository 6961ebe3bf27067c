-- Trusted documents (issue 37): the GraphQL documents an organization registered, by their SHA-256 document id
-- (`sha256:<64 lower-case hex digits>`, GraphQL-over-HTTP Appendix A). A request may name one by its id instead of
-- sending its text, and a key marked trusted-documents-only may run no other. A row is never changed: the id is the
-- hash of the text, so registering the same document again is a no-op (INSERT … ON CONFLICT DO NOTHING).
CREATE TABLE "trusted_documents" (
    "organization_id" TEXT NOT NULL,
    "document_id" TEXT NOT NULL,
    "document" TEXT NOT NULL,
    -- The names of the document's operations, as a JSON array of strings (null for an anonymous operation).
    "operation_names" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "trusted_documents_pkey" PRIMARY KEY ("organization_id", "document_id")
);

-- The registry's listing, oldest first (a keyset on created_at, document_id).
CREATE INDEX "trusted_documents_organization_id_created_at_document_id_idx" ON "trusted_documents"("organization_id", "created_at", "document_id");

ALTER TABLE "trusted_documents" ADD CONSTRAINT "trusted_documents_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- A key that may run registered documents only: GraphQL text it sends is refused unless it is a registered document.
ALTER TABLE "api_keys" ADD COLUMN "trusted_documents_only" BOOLEAN NOT NULL DEFAULT false;
