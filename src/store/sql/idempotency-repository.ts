import type { Clock } from "../../domain/shared/clock.ts";
import type { IdempotencyRecord, IdempotencyStore } from "../../domain/idempotency/idempotency-store.ts";
import type { Database } from "../database.ts";
import type { SecretCipher } from "../secret-cipher.ts";
import { Prisma } from "./sql-template.ts";
import { literalLimit } from "./literal-limit.ts";

interface IdempotencyRow {
  readonly organization_id: string;
  readonly key: string;
  readonly request_hash: string;
  readonly status_code: number | null;
  readonly response_body: string | null;
  readonly created_at: Date | string;
}

/**
 * Stored responses for `Idempotency-Key` (table idempotency_records), one statement each on the driver. Every
 * response body is stored encrypted with the webhook secrets' cipher (docs/decisions.md, "Secrets"): the
 * response to creating or rotating a webhook endpoint carries its signing secret, and encrypting every body
 * rather than telling those apart leaves no way for a secret to be stored in plain text. A body stored before
 * encryption is read as it is (the cipher's plain-text rule); pruning removes it with its window.
 */
export class SqlIdempotencyRepository implements IdempotencyStore {
  constructor(
    private readonly database: Database,
    private readonly clock: Clock,
    private readonly cipher: SecretCipher,
  ) {}

  async find(organizationId: string, key: string): Promise<IdempotencyRecord | null> {
    const [row] = await this.database.sql.all<IdempotencyRow>(Prisma.sql`
      SELECT "organization_id", "key", "request_hash", "status_code", "response_body", "created_at"
      FROM "idempotency_records" WHERE "organization_id" = ${organizationId} AND "key" = ${key}`);
    if (!row) return null;
    return {
      organizationId: row.organization_id,
      key: row.key,
      requestHash: row.request_hash,
      statusCode: row.status_code === null ? null : Number(row.status_code),
      responseBody: row.response_body === null ? null : this.cipher.decrypt(row.response_body),
      // SQLite stores ISO text with its zone; PostgreSQL's rows come back as Date.
      createdAt: new Date(row.created_at),
    };
  }

  async claim(organizationId: string, key: string, requestHash: string): Promise<boolean> {
    const inserted = await this.database.sql.run(Prisma.sql`
      INSERT INTO "idempotency_records" ("organization_id", "key", "request_hash", "created_at")
      VALUES (${organizationId}, ${key}, ${requestHash}, ${this.clock.now()})
      ON CONFLICT ("organization_id", "key") DO NOTHING`);
    return inserted === 1;
  }

  async complete(organizationId: string, key: string, statusCode: number, responseBody: string): Promise<void> {
    await this.database.sql.run(Prisma.sql`
      UPDATE "idempotency_records" SET "status_code" = ${statusCode}, "response_body" = ${this.cipher.encrypt(responseBody)}
      WHERE "organization_id" = ${organizationId} AND "key" = ${key}`);
  }

  async release(organizationId: string, key: string): Promise<void> {
    await this.database.sql.run(Prisma.sql`
      DELETE FROM "idempotency_records" WHERE "organization_id" = ${organizationId} AND "key" = ${key}`);
  }

  async deleteCreatedBefore(cutoff: Date, batchSize: number): Promise<number> {
    // Row values: one statement, the same on both databases; the batch is found through the created_at index.
    return this.database.sql.run(Prisma.sql`
      DELETE FROM "idempotency_records" WHERE ("organization_id", "key") IN (
        SELECT "organization_id", "key" FROM "idempotency_records" WHERE "created_at" < ${cutoff} LIMIT ${literalLimit(batchSize)})`);
  }
}
