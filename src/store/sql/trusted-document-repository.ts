import type {
  TrustedDocumentPosition,
  TrustedDocumentRepository,
} from "../../domain/documents/trusted-document-repository.ts";
import type { TrustedDocument } from "../../domain/models.ts";
import type { Database } from "../database.ts";
import type { SqlExecutor } from "./executor.ts";
import { fromJson, timestampParameter, toDate } from "./rows.ts";
import { Prisma } from "./sql-template.ts";
import { isOneOf } from "./value-lists.ts";
import { literalLimit } from "./literal-limit.ts";

/*
 * The trusted_documents table (migration 0017). A registration is one statement whatever the manifest's length:
 * the documents travel as one JSON parameter, read back as rows by the database (json_each on SQLite,
 * json_to_recordset on PostgreSQL), and ON CONFLICT DO NOTHING lets the database decide between two registrations
 * of the same document.
 */

const COLUMNS = Prisma.raw(`"organization_id", "document_id", "document", "operation_names", "created_at"`);

interface DocumentRow {
  readonly organization_id: string;
  readonly document_id: string;
  readonly document: string;
  readonly operation_names: unknown;
  readonly created_at: unknown;
}

function documentFromRow(row: DocumentRow): TrustedDocument {
  return {
    organizationId: row.organization_id,
    documentId: row.document_id,
    document: row.document,
    operationNames: fromJson(row.operation_names) as (string | null)[],
    createdAt: toDate(row.created_at),
  };
}

export class SqlTrustedDocumentRepository implements TrustedDocumentRepository {
  constructor(
    private readonly database: Database,
    /** Runs every statement: the driver, or the transaction of the unit of work that built this repository. */
    private readonly sql: SqlExecutor,
  ) {}

  async insertDocumentsIfAbsent(
    organizationId: string,
    createdAt: Date,
    documents: readonly Pick<TrustedDocument, "documentId" | "document" | "operationNames">[],
  ): Promise<string[]> {
    if (documents.length === 0) return [];
    const rows = JSON.stringify(
      documents.map((document) => ({
        id: document.documentId,
        text: document.document,
        names: JSON.stringify(document.operationNames),
      })),
    );
    const created = timestampParameter(this.database.provider, createdAt);
    const source =
      this.database.provider === "postgres"
        ? Prisma.sql`SELECT ${organizationId}, d."id", d."text", d."names", ${created}
            FROM json_to_recordset(CAST(${rows} AS JSON)) AS d ("id" TEXT, "text" TEXT, "names" TEXT)`
        : // `WHERE true`: SQLite's grammar needs it between a SELECT and ON CONFLICT.
          Prisma.sql`SELECT ${organizationId}, json_extract(d."value", '$.id'), json_extract(d."value", '$.text'),
              json_extract(d."value", '$.names'), ${created}
            FROM json_each(${rows}) AS d WHERE true`;
    const inserted = await this.sql.all<{ document_id: string }>(Prisma.sql`
      INSERT INTO "trusted_documents" (${COLUMNS}) ${source}
      ON CONFLICT ("organization_id", "document_id") DO NOTHING
      RETURNING "document_id"`);
    return inserted.map((row) => row.document_id);
  }

  async countDocuments(organizationId: string): Promise<number> {
    const [row] = await this.sql.all<{ count: number | bigint | string }>(Prisma.sql`
      SELECT COUNT(*) AS "count" FROM "trusted_documents" WHERE "organization_id" = ${organizationId}`);
    return Number(row?.count ?? 0);
  }

  async findDocuments(organizationId: string, documentIds: readonly string[]): Promise<TrustedDocument[]> {
    if (documentIds.length === 0) return [];
    const rows = await this.sql.all<DocumentRow>(Prisma.sql`
      SELECT ${COLUMNS} FROM "trusted_documents"
      WHERE "organization_id" = ${organizationId}
        AND ${isOneOf(this.database.provider, Prisma.sql`"document_id"`, documentIds)}`);
    return rows.map(documentFromRow);
  }

  async listDocuments(
    organizationId: string,
    page: { readonly after?: TrustedDocumentPosition; readonly limit: number },
  ): Promise<TrustedDocument[]> {
    const { after, limit } = page;
    const afterClause = after
      ? Prisma.sql`AND ("created_at" > ${after.createdAt}
          OR ("created_at" = ${after.createdAt} AND "document_id" > ${after.documentId}))`
      : Prisma.empty;
    const rows = await this.sql.all<DocumentRow>(Prisma.sql`
      SELECT ${COLUMNS} FROM "trusted_documents"
      WHERE "organization_id" = ${organizationId} ${afterClause}
      ORDER BY "created_at", "document_id" LIMIT ${literalLimit(limit)}`);
    return rows.map(documentFromRow);
  }
}
