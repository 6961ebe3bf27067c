import type { Clock } from "../domain/shared/clock.ts";
import type { IdempotencyRecord, IdempotencyStore } from "../domain/idempotency/idempotency-store.ts";
import type { Database } from "./database.ts";

/** Stored responses for `Idempotency-Key` (table idempotency_records). */
export class PrismaIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly database: Database,
    private readonly clock: Clock,
  ) {}

  find(organizationId: string, key: string): Promise<IdempotencyRecord | null> {
    return this.database.prisma.idempotencyRecord.findUnique({
      where: { organizationId_key: { organizationId, key } },
    });
  }

  async claim(organizationId: string, key: string, requestHash: string): Promise<boolean> {
    const inserted = await this.database.prisma.$executeRaw`
      INSERT INTO "idempotency_records" ("organization_id", "key", "request_hash", "created_at")
      VALUES (${organizationId}, ${key}, ${requestHash}, ${this.clock.now()})
      ON CONFLICT ("organization_id", "key") DO NOTHING`;
    return inserted === 1;
  }

  async complete(organizationId: string, key: string, statusCode: number, responseBody: string): Promise<void> {
    await this.database.prisma.idempotencyRecord.updateMany({
      where: { organizationId, key },
      data: { statusCode, responseBody },
    });
  }

  async release(organizationId: string, key: string): Promise<void> {
    await this.database.prisma.idempotencyRecord.deleteMany({ where: { organizationId, key } });
  }
}
