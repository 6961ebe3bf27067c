import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { containerNumber } from "./support/container-numbers.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Pages of references send the JSON text each reference's row keeps (`rest_json`, written by a database trigger:
 * migration 0013), not a serialization of the row. The text must be exactly what GET /v1/references/{id}
 * serializes for the same reference — same values, same key order, same bytes as JSON.stringify — whatever wrote
 * the row last: creation, tags added, renamed, deleted and removed, bulk ingestion (extraction outcomes,
 * estimates, deactivation), children, deactivation over REST.
 */

describe.each(DATABASE_KINDS)("references' stored REST JSON on %s", (kind) => {
  let server: TestServer;
  let serial = 0;

  beforeAll(async () => {
    server = await startTestServer(kind, { env: { WEBHOOK_WORKER: "off" } });
  });
  afterAll(async () => {
    await server?.close();
  });

  async function create(body: Record<string, unknown>): Promise<{ id: string; tags: { id: string; name: string }[] }> {
    const created = await http(server, "POST", "/v1/references", { body: { carrier_code: "MSCU", ...body } });
    expectStatus(created, 201);
    return created.body.reference;
  }

  /**
   * Every page of the organization's references, read raw, against each reference read alone: the page's bytes
   * are JSON.stringify of the single reads, in page order.
   */
  async function expectPagesMatchSingleReads(path = "/v1/references"): Promise<number> {
    let cursor: string | null = null;
    let seen = 0;
    do {
      const url: string = `${path}${path.includes("?") ? "&" : "?"}limit=7${cursor ? `&cursor=${cursor}` : ""}`;
      const response = await fetch(`${server.url}${url}`, {
        headers: { "x-api-key": server.apiKey, "cache-control": "no-cache" },
      });
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toBe("application/json; charset=utf-8");
      const text = await response.text();
      const page = JSON.parse(text) as { data: { id: string }[]; next_cursor: string | null };
      const singles = await Promise.all(
        page.data.map(async (reference) => {
          const single = await http(server, "GET", `/v1/references/${reference.id}`);
          expectStatus(single, 200);
          return single.body;
        }),
      );
      expect(text).toBe(JSON.stringify({ data: singles, next_cursor: page.next_cursor }));
      seen += singles.length;
      cursor = page.next_cursor;
    } while (cursor !== null);
    return seen;
  }

  it("is what a single read serializes, after every kind of write", async () => {
    const awkward = ['quote "q"', "back\\slash", "ünïcödé 🚢", "slash/and<tags>&amp;", "Zeta"];
    const first = await create({
      container_id: containerNumber("RJSU", (serial += 1)),
      tags: awkward.map((name) => ({ name })),
    });
    const second = await create({
      bill_of_lading: "BL-7",
      tags: [{ name: "Zeta" }, { name: "alpha" }],
    });
    const plain = await create({ booking_number: "BK-1" });
    expect(await expectPagesMatchSingleReads()).toBe(3);

    // Tags renamed (every carrier's text), removed from one reference, deleted, added.
    const zeta = first.tags.find((tag) => tag.name === "Zeta")!;
    expectStatus(await http(server, "PATCH", `/v1/tags/${zeta.id}`, { body: { name: 'renamed "zeta" ⚓' } }), 200);
    const quote = first.tags.find((tag) => tag.name === 'quote "q"')!;
    expectStatus(await http(server, "DELETE", `/v1/references/${first.id}/tags/${quote.id}`), 204);
    const slash = first.tags.find((tag) => tag.name.startsWith("slash"))!;
    expectStatus(await http(server, "DELETE", `/v1/tags/${slash.id}`), 204);
    expectStatus(
      await http(server, "POST", `/v1/references/${plain.id}/tags`, { body: { tags: [{ name: "late" }] } }),
      200,
    );
    expect(await expectPagesMatchSingleReads()).toBe(3);

    // Bulk ingestion: outcomes (status and failure count), estimates with offsets, deactivation and back.
    const ingested = await http(server, "POST", "/v1/ingestions", {
      body: {
        items: [
          {
            kind: "extraction",
            reference_id: first.id,
            status: "failed",
            error: { code: "TIMEOUT", message: "no answer" },
          },
          {
            kind: "update",
            reference_id: second.id,
            update: { estimated_departure: "2026-12-01T08:00:00.5Z", estimated_arrival: "0999-12-20T08:00:00+01:00" },
          },
          { kind: "deactivate", reference_id: plain.id, reason: "data_not_found" },
        ],
      },
    });
    expectStatus(ingested, 201);
    expectStatus(
      await http(server, "POST", `/v1/references/${second.id}/deactivate`, { body: { reason: "carrier_not_found" } }),
      200,
    );
    const single = await http(server, "GET", `/v1/references/${second.id}`);
    expect(single.body).toMatchObject({
      active: false,
      deactivate_reason: "carrier_not_found",
      estimated_departure: "2026-12-01T08:00:00.500Z",
      estimated_arrival: "0999-12-20T07:00:00.000Z",
    });
    const failedOnce = await http(server, "GET", `/v1/references/${first.id}`);
    expect(failedOnce.body).toMatchObject({ consecutive_failures: 1, last_update_status: "failed" });

    // Children of a bill of lading (parent id set) and the tag's own listing.
    const children = await http(server, "POST", `/v1/references/${second.id}/children`, {
      body: { container_ids: [containerNumber("RJSU", (serial += 1)), containerNumber("RJSU", (serial += 1))] },
    });
    expect([200, 201]).toContain(children.status);
    expect(await expectPagesMatchSingleReads()).toBe(5);
    const alpha = second.tags.find((tag) => tag.name === "alpha")!;
    expect(await expectPagesMatchSingleReads(`/v1/tags/${alpha.id}/references`)).toBeGreaterThanOrEqual(1);
  });
});
