import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { expectStatus, http } from "./support/http.ts";
import { startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * An event carries the reference's tags at the moment it was written: removing a tag serializes with event
 * writes on the reference, as adding one does (both lock the reference). Raced on PostgreSQL, where writes run
 * in parallel (SQLite runs one write transaction at a time): each iteration removes the tag while two events are
 * being written. The events present when the removal is acknowledged are read at once; an event that appears
 * only afterwards was written after the removal, and must not carry the tag.
 */

const ITERATIONS = 150;

describe("removing a tag while events are written, on postgres", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer("postgres");
  }, 60_000);
  afterAll(async () => {
    await server?.close();
  });

  async function eventsOf(referenceId: string): Promise<{ id: string; tagIds: string[] }[]> {
    const rows = await server.database.prisma.$queryRawUnsafe<{ id: string; reference_tags: unknown }[]>(
      `SELECT "id", "reference_tags" FROM "lifecycle_events" WHERE "reference_id" = $1`,
      referenceId,
    );
    return rows.map((row) => {
      const tags = (typeof row.reference_tags === "string" ? JSON.parse(row.reference_tags) : row.reference_tags) as {
        id: string;
      }[];
      return { id: row.id, tagIds: tags.map((tag) => tag.id) };
    });
  }

  it(`writes no event carrying the tag after the removal is acknowledged (${ITERATIONS} races)`, async () => {
    const firstTen = "RACU0000001";
    const created = await http(server, "POST", "/v1/references", {
      body: {
        container_id: `${firstTen.slice(0, 10)}${computeCheckDigit(firstTen.slice(0, 10))}`,
        carrier_code: "MSCU",
      },
    });
    expectStatus(created, 201);
    const referenceId: string = created.body.reference.id;
    const writeEvent = () =>
      http(server, "POST", `/v1/references/${referenceId}/extractions`, { body: { status: "succeeded" } });

    const disagreements: string[] = [];
    let eventsWritten = 0;
    for (let iteration = 0; iteration < ITERATIONS; iteration++) {
      const attached = await http(server, "POST", `/v1/references/${referenceId}/tags`, {
        body: { tags: [{ name: "racing" }] },
      });
      expectStatus(attached, 200);
      const tagId: string = attached.body.tags.find((tag: { name: string }) => tag.name === "racing").id;
      const before = new Set((await eventsOf(referenceId)).map((event) => event.id));

      let visibleAtAcknowledgement: Set<string> | undefined;
      const detach = http(server, "DELETE", `/v1/references/${referenceId}/tags/${tagId}`).then(async (result) => {
        expectStatus(result, 204);
        visibleAtAcknowledgement = new Set((await eventsOf(referenceId)).map((event) => event.id));
      });
      const writes = await Promise.all([writeEvent(), writeEvent(), detach]);
      for (const write of writes.slice(0, 2)) expectStatus(write as Awaited<ReturnType<typeof writeEvent>>, 201);

      for (const event of await eventsOf(referenceId)) {
        if (before.has(event.id)) continue;
        eventsWritten += 1;
        if (!visibleAtAcknowledgement!.has(event.id) && event.tagIds.includes(tagId)) {
          disagreements.push(`iteration ${iteration}: event ${event.id}`);
        }
      }
    }
    expect(eventsWritten).toBe(2 * ITERATIONS);
    expect(disagreements).toEqual([]);
  }, 180_000);
});
