import {
  IN_FLIGHT,
  OUTCOME_LOST,
  type OpenAttempt,
  type WebhookAttemptLog,
} from "../../domain/webhooks/webhook-attempt-log.ts";
import type { LostAttempt } from "../../domain/webhooks/lost-attempts.ts";
import { findInChunks } from "./in-chunks.ts";
import { chunksOf, toDate } from "./rows.ts";
import type { SqlExecutor } from "./executor.ts";
import { Prisma } from "./sql-template.ts";

/* Open attempts (src/domain/webhooks/webhook-attempt-log.ts) in "webhook_attempts", in raw SQL. */
export class SqlWebhookAttemptLog implements WebhookAttemptLog {
  constructor(private readonly sql: SqlExecutor) {}

  async closeLost(deliveryIds: readonly string[]): Promise<LostAttempt[]> {
    const rows = await findInChunks(deliveryIds, (chunk) =>
      this.sql.all<{ delivery_id: string; attempted_at: unknown }>(Prisma.sql`
        UPDATE "webhook_attempts" SET "error" = ${OUTCOME_LOST}
        WHERE "delivery_id" IN (${Prisma.join(chunk)}) AND "status_code" IS NULL AND "error" = ${IN_FLIGHT}
        RETURNING "delivery_id", "attempted_at"`),
    );
    return rows.map((row) => ({ deliveryId: row.delivery_id, attemptedAt: toDate(row.attempted_at) }));
  }

  async open(attempts: readonly OpenAttempt[]): Promise<void> {
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
