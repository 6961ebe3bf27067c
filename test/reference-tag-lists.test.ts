import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Prisma } from "../src/store/__generated__/sqlite/client.ts";
import { containerNumber } from "./support/container-numbers.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * A reference keeps the tags it carries on its own row (`tag_list`), and pages read them from there. Whatever
 * changes a reference's tags — a link added or removed, a child created with its parent's tags, a tag renamed or
 * deleted — changes every carrier's list in the same transaction: the pages show exactly the links, also when
 * links and renames race on PostgreSQL.
 */

describe.each(DATABASE_KINDS)("reference tag lists on %s", (kind) => {
  let server: TestServer;
  let serial = 0;

  beforeAll(async () => {
    server = await startTestServer(kind, { env: { WEBHOOK_WORKER: "off" } });
  });
  afterAll(async () => {
    await server?.close();
  });

  async function createReference(tags: { name: string }[]): Promise<string> {
    const created = await http(server, "POST", "/v1/references", {
      body: { container_id: containerNumber("TLSU", (serial += 1)), carrier_code: "MSCU", tags },
    });
    expectStatus(created, 201);
    return created.body.reference.id;
  }

  /** The tag names every reference of the organization shows in a page, by reference id. */
  async function namesOnPages(): Promise<Map<string, string[]>> {
    const page = await http(server, "GET", "/v1/references?limit=200");
    expectStatus(page, 200);
    return new Map(
      page.body.data.map((reference: { id: string; tags: { name: string }[] }) => [
        reference.id,
        reference.tags.map((tag) => tag.name),
      ]),
    );
  }

  /** The same, from the links themselves, in the order of the lists (case-folded name, then id). */
  async function namesFromLinks(): Promise<Map<string, string[]>> {
    const rows = await server.database.sql.all<{ reference_id: string; name: string }>(Prisma.sql`
      SELECT r."id" AS "reference_id", t."name" FROM "shipping_references" r
      JOIN "reference_tags" rt ON rt."reference_id" = r."id" JOIN "tags" t ON t."id" = rt."tag_id"
      WHERE r."organization_id" = ${server.organizationId}
      ORDER BY r."id", t."name_key", t."id"`);
    const all = await server.database.sql.all<{ id: string }>(Prisma.sql`
      SELECT "id" FROM "shipping_references" WHERE "organization_id" = ${server.organizationId}`);
    const names = new Map<string, string[]>(all.map((row) => [row.id, []]));
    for (const row of rows) names.get(row.reference_id)!.push(row.name);
    return names;
  }

  async function tagId(name: string): Promise<string> {
    const page = await http(server, "GET", `/v1/tags?name_prefix=${encodeURIComponent(name)}`);
    expectStatus(page, 200);
    const tag = page.body.data.find((candidate: { name: string }) => candidate.name === name);
    expect(tag).toBeDefined();
    return tag.id;
  }

  it("shows a link added, a link removed, a rename and a deletion on every carrier's page", async () => {
    const first = await createReference([{ name: "zulu" }, { name: "Alpha" }]);
    const second = await createReference([{ name: "alpha" }]);
    expect((await namesOnPages()).get(first)).toEqual(["Alpha", "zulu"]);
    expect((await namesOnPages()).get(second)).toEqual(["Alpha"]);

    expectStatus(
      await http(server, "POST", `/v1/references/${second}/tags`, { body: { tags: [{ name: "mike" }] } }),
      200,
    );
    expect((await namesOnPages()).get(second)).toEqual(["Alpha", "mike"]);

    const alpha = await tagId("Alpha");
    expectStatus(await http(server, "PATCH", `/v1/tags/${alpha}`, { body: { name: "yankee" } }), 200);
    let pages = await namesOnPages();
    // Renamed, and moved to its new place in name order.
    expect(pages.get(first)).toEqual(["yankee", "zulu"]);
    expect(pages.get(second)).toEqual(["mike", "yankee"]);

    expectStatus(await http(server, "DELETE", `/v1/references/${first}/tags/${await tagId("zulu")}`), 204);
    expect((await namesOnPages()).get(first)).toEqual(["yankee"]);

    expectStatus(await http(server, "DELETE", `/v1/tags/${alpha}`), 204);
    pages = await namesOnPages();
    expect(pages.get(first)).toEqual([]);
    expect(pages.get(second)).toEqual(["mike"]);
    expect(pages).toEqual(await namesFromLinks());
  });

  it("leaves every list as it was when a rename is refused", async () => {
    const reference = await createReference([{ name: "kilo" }, { name: "lima" }]);
    const kilo = await tagId("kilo");
    const refused = await http(server, "PATCH", `/v1/tags/${kilo}`, { body: { name: "LIMA" } });
    expect(refused.status).toBe(409);
    expect((await namesOnPages()).get(reference)).toEqual(["kilo", "lima"]);
  });

  it("gives a child its parent's tags", async () => {
    const parent = await http(server, "POST", "/v1/references", {
      body: { booking_number: `BK-TAG-LISTS-${kind}`, carrier_code: "MSCU", tags: [{ name: "oscar" }] },
    });
    expectStatus(parent, 201);
    const reported = await http(server, "POST", `/v1/references/${parent.body.reference.id}/children`, {
      body: { container_ids: [containerNumber("TLSU", 9000)] },
    });
    expectStatus(reported, 200);
    const children = await http(server, "GET", `/v1/references?parent_reference_id=${parent.body.reference.id}`);
    expectStatus(children, 200);
    expect(children.body.data).toHaveLength(1);
    expect(children.body.data[0].tags.map((tag: { name: string }) => tag.name)).toEqual(["oscar"]);
    expect(await namesOnPages()).toEqual(await namesFromLinks());
  });

  it("keeps every list equal to the links while links, unlinks, renames and a deletion run in parallel", async () => {
    const references = await Promise.all(
      Array.from({ length: 12 }, (_, index) =>
        createReference(index % 2 === 0 ? [{ name: "race-a" }] : [{ name: "race-b" }, { name: "race-c" }]),
      ),
    );
    const [a, b, c] = [await tagId("race-a"), await tagId("race-b"), await tagId("race-c")];
    const requests: Promise<{ status: number }>[] = [];
    for (const [index, reference] of references.entries()) {
      requests.push(http(server, "POST", `/v1/references/${reference}/tags`, { body: { tags: [{ id: c }] } }));
      if (index % 2 === 1) requests.push(http(server, "DELETE", `/v1/references/${reference}/tags/${b}`));
      if (index === 3) requests.push(http(server, "PATCH", `/v1/tags/${c}`, { body: { name: "race-c-renamed" } }));
      if (index === 6) requests.push(http(server, "PATCH", `/v1/tags/${a}`, { body: { name: "race-a-renamed" } }));
      if (index === 9) requests.push(http(server, "DELETE", `/v1/tags/${b}`));
    }
    const statuses = (await Promise.all(requests)).map((response) => response.status);
    // Links to a tag deleted meanwhile are refused or find nothing; everything else succeeds.
    for (const status of statuses) expect([200, 204, 404]).toContain(status);
    const pages = await namesOnPages();
    expect(pages).toEqual(await namesFromLinks());
    for (const reference of references) expect(pages.get(reference)).toContain("race-c-renamed");
  });
});
