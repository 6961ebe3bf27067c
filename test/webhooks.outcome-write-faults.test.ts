import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually, getDelivery, listDeliveries } from "./support/webhooks.ts";

/*
 * An outcome whose write fails because the database is away for a moment (a connection killed, a restart) is
 * written again while its lease holds: it is not lost, so the request is not sent a second time and the attempt
 * log holds the answer instead of an attempt whose outcome is unknown.
 *
 * The fault is the database's own: a trigger makes the first two writes of an answered attempt fail with SQLSTATE
 * 08006 (connection failure), which is what the driver reports for a connection lost mid-transaction. PostgreSQL
 * only: SQLite's triggers cannot raise a "database unavailable" error.
 */

const FAILED_WRITES = 2;

describe("an outcome whose write failed while the database was away (postgres)", () => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  let admin: pg.Client;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer("postgres", {
      env: { WEBHOOK_TIMEOUT: "1s", WEBHOOK_LEASE: "5s", WEBHOOK_POLL_INTERVAL: "100ms" },
    });
    admin = new pg.Client({ connectionString: server.database.url });
    await admin.connect();
    // A sequence, not a table: its count survives the rollback of the transaction the trigger fails.
    await admin.query(`
      CREATE SEQUENCE "outcome_write_faults";
      CREATE FUNCTION "fail_outcome_writes"() RETURNS trigger AS $$
      BEGIN
        IF NEW."status_code" IS NOT NULL AND nextval('outcome_write_faults') <= ${FAILED_WRITES} THEN
          RAISE EXCEPTION 'connection lost (injected)' USING ERRCODE = '08006';
        END IF;
        RETURN NEW;
      END $$ LANGUAGE plpgsql;
      CREATE TRIGGER "fail_outcome_writes" BEFORE INSERT ON "webhook_attempts"
        FOR EACH ROW EXECUTE FUNCTION "fail_outcome_writes"();`);
  });

  afterAll(async () => {
    await admin?.end();
    await server?.close();
    await receiver?.close();
  });

  it("is written again: the request goes out once and its answer is logged", async () => {
    const caller = { url: server.url, apiKey: server.apiKey };
    const endpoint = await createEndpoint(caller, { url: receiver.url("/outcome-faults") });
    await createReference(caller);

    const [delivery] = await eventually(async () => {
      const deliveries = await listDeliveries(caller, endpoint.id);
      return deliveries.length === 1 && deliveries[0].status === "succeeded" ? deliveries : null;
    }, 30_000);

    // The faults did happen: the answer's write failed twice before it went through.
    const { rows } = await admin.query<{ last_value: string }>(`SELECT "last_value" FROM "outcome_write_faults"`);
    expect(Number(rows[0]!.last_value)).toBeGreaterThan(FAILED_WRITES);
    expect(receiver.on("/outcome-faults").map((hook) => hook.webhookId)).toEqual([delivery.id]);
    expect(delivery).toMatchObject({ status: "succeeded", attempt_count: 1 });
    const detail = await getDelivery(caller, endpoint.id, delivery.id);
    expect(detail.attempts.map((attempt: { status_code: number | null }) => attempt.status_code)).toEqual([200]);
  }, 60_000);
});
