import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { expectStatus, http } from "./support/http.ts";
import { startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, type Caller } from "./support/webhooks.ts";

/*
 * The order locks of the claim heads' triggers (issue 50.7): every statement that writes several references'
 * deliveries to an ordered endpoint (an outbox insert of an ingestion, an outcome batch) takes their advisory locks
 * in one sorted order before its rows do. Two instances on one PostgreSQL database race ingestions that touch the
 * same references in opposite orders while their workers record outcome batches of those references' deliveries:
 * every request succeeds, no unit of work is run again, and PostgreSQL counted no deadlock.
 */

const REFERENCES = 40;
const ROUNDS = 20;
const ENV = { WEBHOOK_POLL_INTERVAL: "50ms" };

/** Counters of the server's /metrics whose name starts with `name` (labels included), summed. */
async function metric(server: TestServer, name: string): Promise<number> {
  const text = String((await http(server, "GET", "/metrics", { apiKey: null })).body);
  return text
    .split("\n")
    .filter((line) => line.startsWith(name))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
}

describe("order locks taken in one sorted order on postgres", () => {
  let first: TestServer | undefined;
  let second: TestServer | undefined;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    first = await startTestServer("postgres", { env: ENV });
    second = await startInstanceOn(first, { env: ENV });
  });
  afterAll(async () => {
    await second?.close();
    await first?.close();
    await receiver?.close();
  });

  it("lets ingestions and outcome batches sharing references in opposite orders run without a deadlock", async () => {
    const one: Caller = first!;
    const other: Caller = { url: second!.url, apiKey: first!.apiKey };
    await createEndpoint(one, { url: receiver.url("/order-locks"), ordering: "reference" });
    const references: string[] = [];
    for (let index = 0; index < REFERENCES; index++) references.push((await createReference(one)).id);
    await receiver.waitForCount("/order-locks", REFERENCES, 30_000);

    const database = new pg.Client({ connectionString: first!.database.url });
    await database.connect();
    const deadlocks = async () =>
      Number(
        (await database.query("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")).rows[0]
          .deadlocks,
      );
    try {
      const deadlocksBefore = await deadlocks();
      const ingest = async (caller: Caller, ids: readonly string[]) => {
        for (let round = 0; round < ROUNDS; round++) {
          const items = ids.map((id) => ({ kind: "extraction", reference_id: id, status: "succeeded" }));
          expectStatus(await http(caller, "POST", "/v1/ingestions", { body: { items } }), 201);
        }
      };
      // Opposite orders through the two instances, twice each.
      await Promise.all([
        ingest(one, references),
        ingest(other, [...references].reverse()),
        ingest(one, [...references].reverse()),
        ingest(other, references),
      ]);
      const expected = REFERENCES + 4 * ROUNDS * REFERENCES;
      await receiver.waitForCount("/order-locks", expected, 120_000);

      // No unit of work was run again on either instance...
      expect(await metric(first!, "reftrail_contended_units_total")).toBe(0);
      expect(await metric(second!, "reftrail_contended_units_total")).toBe(0);
      // ...and PostgreSQL broke no deadlock (read once the second instance has closed its connections, whose
      // statistics are reported as they end; the first's are reported within a second of each transaction).
      await second!.close();
      second = undefined;
      expect((await deadlocks()) - deadlocksBefore).toBe(0);
    } finally {
      await database.end();
    }
  }, 240_000);
});
