import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * A query parameter a route does not take is refused (400, naming it), never ignored: ignored, `after=` on a route
 * that pages with `cursor` would answer the first page for ever, and the client would loop on it. Every operation
 * of the OpenAPI document is tried, so that a new route is covered without a line here.
 */

const UNUSED_ID = "00000000-0000-4000-8000-000000000000";

describe.each(DATABASE_KINDS)("unknown query parameters on %s", (kind) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(kind);
  }, 60_000);
  afterAll(async () => {
    await server?.close();
  });

  it("refuses a paging parameter of the other style, saying which one the route takes", async () => {
    const list = await http(server, "GET", "/v1/references?after=abc");
    expect(list.status).toBe(400);
    expect(list.body).toMatchObject({ status: 400, code: "INVALID_QUERY_PARAMETER" });
    expect(list.body.errors).toEqual([
      { pointer: "after", code: "UNKNOWN_QUERY_PARAMETER", message: expect.stringContaining("use cursor") },
    ]);
    const feed = await http(server, "GET", "/v1/events?cursor=abc");
    expect(feed.status).toBe(400);
    expect(feed.body.errors[0]).toMatchObject({ pointer: "cursor", message: expect.stringContaining("use after") });
    // The parameters a route takes still work, and a path with no route is still a 404.
    expectStatus(await http(server, "GET", "/v1/references?limit=1"), 200);
    expect((await http(server, "GET", "/v1/no-such-route?x=1")).status).toBe(404);
  });

  it("refuses an unknown query parameter on every operation of the API", async () => {
    const document = await http(server, "GET", "/v1/openapi.json");
    expectStatus(document, 200);
    const operations = Object.entries(document.body.paths as Record<string, Record<string, unknown>>).flatMap(
      ([path, methods]) => Object.keys(methods).map((method) => ({ method: method.toUpperCase(), path })),
    );
    expect(operations.length).toBeGreaterThan(20);
    for (const { method, path } of operations) {
      const url = `/v1${path.replace(/^\/v1/, "").replace(/\{[^}]+\}/g, UNUSED_ID)}?not_a_parameter=1`;
      const answer = await http(server, method, url, method === "GET" || method === "DELETE" ? {} : { body: {} });
      expect({ method, path, status: answer.status, error: answer.body?.errors?.[0] }).toEqual({
        method,
        path,
        status: 400,
        error: { pointer: "not_a_parameter", code: "UNKNOWN_QUERY_PARAMETER", message: expect.any(String) },
      });
    }
  });
});
