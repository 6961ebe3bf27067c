import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gqlData } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Claims the documentation makes that a client acts on, checked against the running server (issue 51): what a
 * creation answers, which event items carry the tags of the event's time, and what a request that costs more than
 * its key's budget can hold is told. Each claim is also looked up in the page that makes it, so that the page and
 * the server cannot part ways unnoticed.
 */

const ROOT = join(import.meta.dirname, "..");
const read = (path: string) => readFileSync(join(ROOT, path), "utf8").replace(/\s+/g, " ");

describe.each(DATABASE_KINDS)("the documentation's claims (%s)", (kind) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer(kind, { env: { WEBHOOK_WORKER: "off" } });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("a tag's creation answers the tag; a reference's wraps it as { message, reference }", async () => {
    expect(read("README.md")).toContain('`{"message": "Reference created successfully.", "reference": {…}}`');
    const tag = await http(server, "POST", "/v1/tags", { body: { name: "claims" } });
    expectStatus(tag, 201);
    expect(tag.body).toMatchObject({ id: expect.any(String), name: "claims" });
    expect(tag.headers.get("location")).toBe(`/v1/tags/${tag.body.id}`);
    const reference = await http(server, "POST", "/v1/references", {
      body: { container_id: "MSKU9070323", carrier_code: "MAEU", tags: [{ name: "claims" }] },
    });
    expectStatus(reference, 201);
    expect(Object.keys(reference.body).sort()).toEqual(["message", "reference"]);
    expect(reference.body.message).toBe("Reference created successfully.");
    expect(reference.headers.get("location")).toBe(`/v1/references/${reference.body.reference.id}`);
  });

  it("REST event items carry no reference_tags; GraphQL events carry referenceTags", async () => {
    expect(read("docs/contract.md")).toContain(
      "a REST event item (`GET /v1/references/{id}/events`, `GET /v1/events`) is `{ id, occurred_at, reference_id, " +
        "organization_id, type, detail }` and has none",
    );
    const created = await http(server, "POST", "/v1/references", {
      body: { container_id: "CSQU3054383", carrier_code: "MAEU", tags: [{ name: "snapshot" }] },
    });
    expectStatus(created, 201);
    const id = created.body.reference.id as string;
    const page = await http(server, "GET", `/v1/references/${id}/events`);
    expectStatus(page, 200);
    const feed = await http(server, "GET", `/v1/events?reference_id=${id}`);
    expectStatus(feed, 200);
    for (const item of [...page.body.data, ...feed.body.data]) {
      expect(Object.keys(item).sort()).toEqual([
        "detail",
        "id",
        "occurred_at",
        "organization_id",
        "reference_id",
        "type",
      ]);
    }
    const data = await gqlData(
      server,
      `query ($id: ID!) { reference(id: $id) { events(first: 5) { edges { node { referenceTags { name } } } } } }`,
      { id },
    );
    expect(data.reference.events.edges[0].node.referenceTags).toEqual([{ name: "snapshot" }]);
  });

  it("a request that costs more than the key's maximum is told it is charged the maximum once the budget is full", async () => {
    // A page of 50 costs 50 against a bucket of 10: run at a full bucket, charged 10; refused once 1 is spent.
    const issued = await server.app.services.organizations.createApiKey(server.organizationId, {
      budget: { maximum: 10, restoreRate: 0.001 },
    });
    const key = { url: server.url, apiKey: issued.key };
    expectStatus(await http(key, "GET", "/v1/tags?limit=50"), 200);
    const refused = await http(key, "GET", "/v1/tags?limit=50");
    expectStatus(refused, 429);
    expect(refused.body.code).toBe("THROTTLED");
    expect(refused.body.detail).toContain(
      "This request costs 50, more than the API key's budget can hold (10): it is charged 10 and runs once the " +
        "budget is full.",
    );
  });
});
