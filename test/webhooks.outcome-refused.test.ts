import { afterEach, describe, expect, it } from "@jest/globals";
import Sqlite from "better-sqlite3";
import pg from "pg";
import { ANSWER_NOT_STORED } from "../src/domain/webhooks/attempt-text.ts";
import { OUTCOME_LOST } from "../src/domain/webhooks/webhook-attempt-log.ts";
import { sqliteFilePath } from "../src/store/database.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually, getDelivery, listDeliveries } from "./support/webhooks.ts";

/*
 * An outcome the database refuses for a reason of its own (not because it is away) decides nothing but its own
 * delivery: the outcomes written in the same batch are written again one by one and settled, the refused one is
 * recorded without the receiver's text, and an outcome that can never be written counts as a lost attempt, so its
 * delivery moves along the retry schedule and is given up instead of being sent at every lease expiry.
 *
 * The refusal is the database's own: a trigger refuses some attempt rows, on both databases.
 */

/** Makes the database refuse every attempt row written with an answer where `condition` (SQL on NEW) holds. */
async function refuseAttemptWrites(server: TestServer, condition: string): Promise<void> {
  if (server.kind === "sqlite") {
    const sqlite = new Sqlite(sqliteFilePath(server.database.url));
    sqlite.exec(`
      CREATE TRIGGER "refuse_outcome_writes" BEFORE INSERT ON "webhook_attempts"
      WHEN NEW."status_code" IS NOT NULL AND ${condition}
      BEGIN SELECT RAISE(ABORT, 'outcome refused (injected)'); END;`);
    sqlite.close();
    return;
  }
  const admin = new pg.Client({ connectionString: server.database.url });
  await admin.connect();
  await admin.query(`
    CREATE FUNCTION "refuse_outcome_writes"() RETURNS trigger AS $$
    BEGIN
      IF NEW."status_code" IS NOT NULL AND ${condition} THEN RAISE EXCEPTION 'outcome refused (injected)'; END IF;
      RETURN NEW;
    END $$ LANGUAGE plpgsql;
    CREATE TRIGGER "refuse_outcome_writes" BEFORE INSERT ON "webhook_attempts"
      FOR EACH ROW EXECUTE FUNCTION "refuse_outcome_writes"();`);
  await admin.end();
}

describe.each(DATABASE_KINDS)("outcomes the database refuses (%s)", (kind) => {
  let server: TestServer | undefined;
  let receiver: WebhookReceiver;

  afterEach(async () => {
    await server?.close();
    server = undefined;
    await receiver?.close();
  });

  it("settle the rest of their batch once, and their own delivery without the receiver's text", async () => {
    const organizations = 4;
    const eventsEach = 6;
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, {
      env: { WEBHOOK_TIMEOUT: "10s", WEBHOOK_LEASE: "15s", WEBHOOK_POLL_INTERVAL: "100ms" },
    });
    await refuseAttemptWrites(server, `NEW."response_body" = 'refused'`);
    const endpoints = await Promise.all(
      Array.from({ length: organizations }, async (_, index) => {
        const { apiKey } = await server!.newOrganization(`refused-${index}`);
        const caller = { url: server!.url, apiKey };
        const path = `/refused-${index}`;
        // The first organization's receiver answers what the database refuses to store.
        receiver.respond(path, () => ({ body: index === 0 ? "refused" : "ok" }));
        return { caller, path, endpoint: await createEndpoint(caller, { url: receiver.url(path) }) };
      }),
    );
    for (let index = 0; index < eventsEach; index++)
      await Promise.all(endpoints.map(({ caller }) => createReference(caller)));

    for (const [index, { caller, path, endpoint }] of endpoints.entries()) {
      const deliveries = await eventually(
        async () => {
          const listed = await listDeliveries(caller, endpoint.id);
          return listed.length === eventsEach && listed.every((d) => d.status !== "pending") ? listed : null;
        },
        20_000,
        `the deliveries to ${path} to settle`,
      );
      expect(deliveries.map((delivery) => [delivery.status, delivery.attempt_count])).toEqual(
        deliveries.map(() => ["succeeded", 1]),
      );
      expect(
        receiver
          .on(path)
          .map((hook) => hook.webhookId)
          .sort(),
      ).toEqual(deliveries.map((delivery) => delivery.id).sort());
      const { attempts } = await getDelivery(caller, endpoint.id, deliveries[0].id);
      expect(attempts).toEqual([
        expect.objectContaining(
          index === 0
            ? { status_code: 200, error: ANSWER_NOT_STORED, response_body: null }
            : { status_code: 200, error: null, response_body: "ok" },
        ),
      ]);
    }
  }, 90_000);

  it("count as lost attempts when they can never be written: the delivery is given up after the schedule", async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, {
      env: {
        // Long enough that no request times out on a busy machine: every attempt's outcome is refused, not missing.
        WEBHOOK_TIMEOUT: "5s",
        WEBHOOK_LEASE: "6s",
        WEBHOOK_POLL_INTERVAL: "100ms",
        WEBHOOK_RETRY_SCHEDULE: "0s,100ms,100ms",
      },
    });
    await refuseAttemptWrites(server, "1 = 1");
    const caller = { url: server.url, apiKey: server.apiKey };
    const endpoint = await createEndpoint(caller, { url: receiver.url("/never-stored") });
    await createReference(caller);

    const [delivery] = await eventually(
      async () => {
        const listed = await listDeliveries(caller, endpoint.id);
        return listed.length === 1 && listed[0].status !== "pending" ? listed : null;
      },
      30_000,
      "the delivery to be given up",
    );
    // Three attempts, as the schedule allows, each lost: sent three times, never more.
    expect(delivery).toMatchObject({ status: "failed", attempt_count: 3 });
    expect(receiver.on("/never-stored").map((hook) => hook.webhookId)).toEqual([delivery.id, delivery.id, delivery.id]);
    const { attempts } = await getDelivery(caller, endpoint.id, delivery.id);
    expect(attempts.map((attempt: { error: string }) => attempt.error)).toEqual([
      OUTCOME_LOST,
      OUTCOME_LOST,
      OUTCOME_LOST,
    ]);
  }, 60_000);
});
