import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { withLabel } from "./support/with-label.ts";

/*
 * A tracking change writes its update document, the reference's new state, its events and their outbox rows in
 * one transaction; on PostgreSQL several of those statements are in flight at once (the connection pipelines,
 * src/store/sql/executor.ts). Here a real statement fails — a trigger installed in the test database refuses it —
 * first, in the middle and last of that flight: the request is answered 500 with nothing of the change written,
 * and the connections go on serving requests once the trigger is gone.
 */

function containerNumber(serial: number): string {
  const firstTen = `FALU${String(serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

/** A trigger that refuses every `event` (INSERT or UPDATE) on `table`, in the test database's dialect. */
function refusingTrigger(kind: string, name: string, event: "INSERT" | "UPDATE", table: string): string[] {
  return kind === "postgres"
    ? [
        `CREATE OR REPLACE FUNCTION "test_refuse"() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RAISE EXCEPTION 'refused by the test'; END $$`,
        `CREATE TRIGGER "${name}" BEFORE ${event} ON "${table}" FOR EACH ROW EXECUTE FUNCTION "test_refuse"()`,
      ]
    : [`CREATE TRIGGER "${name}" BEFORE ${event} ON "${table}" BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`];
}

describe.each(DATABASE_KINDS)("a statement failing inside a tracking change on %s", (kind) => {
  let server: TestServer;
  let referenceId: string;

  beforeAll(async () => {
    server = await startTestServer(kind, { env: { WEBHOOK_WORKER: "off" } });
    // An endpoint, so that every event also writes an outbox row.
    expectStatus(await http(server, "POST", "/v1/webhooks", { body: { url: "http://127.0.0.1:9/hooks" } }), 201);
    const created = await http(server, "POST", "/v1/references", {
      body: { container_id: containerNumber(1), carrier_code: "MSCU" },
    });
    expectStatus(created, 201);
    referenceId = created.body.reference.id;
  });
  afterAll(async () => {
    await server?.close();
  });

  async function withTrigger(name: string, event: "INSERT" | "UPDATE", table: string, run: () => Promise<void>) {
    for (const statement of refusingTrigger(kind, name, event, table)) {
      await server.database.prisma.$executeRawUnsafe(statement);
    }
    try {
      await run();
    } finally {
      await server.database.prisma.$executeRawUnsafe(
        kind === "postgres" ? `DROP TRIGGER "${name}" ON "${table}"` : `DROP TRIGGER "${name}"`,
      );
    }
  }

  /** What a change could have written: the reference's state, its log, its updates, the outbox. */
  async function written() {
    const noCache = { headers: { "Cache-Control": "no-cache" } };
    const reference = await http(server, "GET", `/v1/references/${referenceId}`, noCache);
    const events = await http(server, "GET", `/v1/references/${referenceId}/events?limit=100`, noCache);
    const updates = await http(server, "GET", `/v1/references/${referenceId}/updates`, noCache);
    const [outbox] = await server.database.prisma.$queryRawUnsafe<{ count: unknown }[]>(
      `SELECT COUNT(*) AS "count" FROM "webhook_deliveries"`,
    );
    return {
      reference: reference.body,
      events: events.body.data.map((event: { type: string }) => event.type),
      updates: updates.body.data.length,
      outbox: Number(outbox!.count),
    };
  }

  const changes = [
    {
      label: "a failed extraction",
      path: "extractions",
      body: { status: "failed", error: { code: "timeout", message: "the carrier did not answer" } },
    },
    { label: "a succeeded extraction", path: "extractions", body: { status: "succeeded" } },
    {
      label: "an update with a new estimate",
      path: "updates",
      body: { vessel: "MSC ANNA", estimated_arrival: "2026-12-01T08:00:00Z" },
    },
  ];
  const failures = [
    { label: "the reference's update (first of the change's writes)", event: "UPDATE", table: "shipping_references" },
    { label: "the events' insert (in the middle)", event: "INSERT", table: "lifecycle_events" },
    { label: "the outbox rows' insert (last)", event: "INSERT", table: "webhook_deliveries" },
  ] as const;

  it("answers 500 and writes nothing of the change, whichever statement fails", async () => {
    for (const failure of failures) {
      for (const change of changes) {
        const label = `${change.label}, failing ${failure.label}`;
        const before = await written();
        await withTrigger("test_refuse_write", failure.event, failure.table, async () => {
          const answer = await http(server, "POST", `/v1/references/${referenceId}/${change.path}`, {
            body: change.body,
          });
          withLabel(label, () => expectStatus(answer, 500));
          // Masked: what failed stays in the log, not in the answer.
          withLabel(label, () => expect(JSON.stringify(answer.body)).not.toMatch(/refused|trigger|lifecycle_events/i));
        });
        const after = await written();
        withLabel(label, () => expect(after).toEqual(before));
      }
    }
  });

  it("serves every connection of the pool again once the statement can succeed", async () => {
    const before = await written();
    // More requests at once than the pool has connections: any connection left inside a failed transaction
    // would fail its next request.
    const answers = await Promise.all(
      Array.from({ length: 24 }, () =>
        http(server, "POST", `/v1/references/${referenceId}/extractions`, { body: { status: "succeeded" } }),
      ),
    );
    for (const answer of answers) expectStatus(answer, 201);
    const after = await written();
    expect(after.events.length - before.events.length).toBeGreaterThan(0);
    expect(after.outbox - before.outbox).toBe(after.events.length - before.events.length);
  });
});
