import {
  IN_FLIGHT,
  OUTCOME_LOST,
  type OpenAttempt,
  type WebhookAttemptLog,
} from "../../domain/webhooks/webhook-attempt-log.ts";
import { findInChunks } from "./in-chunks.ts";
import { chunksOf } from "./rows.ts";
import type { SqlExecutor } from "./executor.ts";
import { Prisma } from "./sql-template.ts";

/* Open attempts (src/domain/webhooks/webhook-attempt-log.ts) in "webhook_attempts", in raw SQL. */
export class SqlWebhookAttemptLog implements WebhookAttemptLog {
  constructor(private readonly sql: SqlExecutor) {}

  async open(attempts: readonly OpenAttempt[]): Promise<void> {
    if (attempts.length === 0) return;
    await findInChunks(
      attempts.map((attempt) => attempt.deliveryId),
      async (chunk) => {
        await this.sql.run(Prisma.sql`
          UPDATE "webhook_attempts" SET "error" = ${OUTCOME_LOST}
          WHERE "delivery_id" IN (${Prisma.join(chunk)}) AND "status_code" IS NULL AND "error" = ${IN_FLIGHT}`);
        return [];
      },
    );
    for (const chunk of chunksOf(attempts, 4)) {
      await this.sql.run(Prisma.sql`
        INSERT INTO "webhook_attempts" ("id", "delivery_id", "attempted_at", "status_code", "error", "latency_ms",
          "response_body")
        VALUES ${Prisma.join(
          chunk.map((a) => Prisma.sql`(${a.id}, ${a.deliveryId}, ${a.openedAt}, NULL, ${IN_FLIGHT}, 0, NULL)`),
        )}`);
    }
  }

  async drop(attemptIds: readonly string[]): Promise<void> {
    await findInChunks(attemptIds, async (chunk) => {
      await this.sql.run(Prisma.sql`
        DELETE FROM "webhook_attempts" WHERE "id" IN (${Prisma.join(chunk)}) AND "error" = ${IN_FLIGHT}`);
      return [];
    });
  }

  async close(attemptIds: readonly string[]): Promise<void> {
    await findInChunks(attemptIds, async (chunk) => {
      await this.sql.run(Prisma.sql`
        UPDATE "webhook_attempts" SET "error" = ${OUTCOME_LOST}
        WHERE "id" IN (${Prisma.join(chunk)}) AND "error" = ${IN_FLIGHT}`);
      return [];
    });
  }
}
