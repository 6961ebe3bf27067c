import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/* REST-specific contract: authentication, problem details, limits, idempotency. */

describe.each(DATABASE_KINDS)("REST shim on %s", (kind) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(kind, { env: { BODY_LIMIT_BYTES: "2048" } });
  });
  afterAll(async () => server?.close());

  it("requires an API key: 401 UNAUTHENTICATED as problem+json; Bearer works; a revoked key stops at once", async () => {
    for (const apiKey of [null, "rt_wrong", "not-even-a-key"]) {
      const result = await http(server, "GET", "/v1/tags", { apiKey });
      expect(result.status).toBe(401);
      expect(result.headers.get("content-type")).toContain("application/problem+json");
      expect(result.body).toMatchObject({ status: 401, code: "UNAUTHENTICATED", title: "Unauthorized" });
    }
    const bearer = await http(server, "GET", "/v1/tags", {
      apiKey: null,
      headers: { authorization: `Bearer ${server.apiKey}` },
    });
    expect(bearer.status).toBe(200);

    const issued = await server.app.services.organizations.createApiKey(server.organizationId);
    expect((await http(server, "GET", "/v1/tags", { apiKey: issued.key })).status).toBe(200);
    await server.app.services.organizations.revokeApiKey(issued.id);
    expect((await http(server, "GET", "/v1/tags", { apiKey: issued.key })).status).toBe(401);
  });

  it("answers body problems precisely: 413, 415, malformed JSON 400, unknown fields 422 with pointers", async () => {
    const tooLarge = await http(server, "POST", "/v1/tags", { body: { name: "x".repeat(4000) } });
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.code).toBe("PAYLOAD_TOO_LARGE");

    const wrongType = await http(server, "POST", "/v1/tags", {
      rawBody: "name=x",
      headers: { "content-type": "text/plain" },
    });
    expect(wrongType.status).toBe(415);

    const malformed = await http(server, "POST", "/v1/tags", {
      rawBody: '{"name":',
      headers: { "content-type": "application/json" },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body.code).toBe("MALFORMED_JSON");

    const unknown = await http(server, "POST", "/v1/references", {
      body: {
        container_id: "CSQU3054383",
        carrier_code: "MAEU",
        tags: [{ name: "ok" }, { id: "x", name: "y" }, { colour: "red" }],
      },
    });
    expect(unknown.status).toBe(422);
    expect(unknown.body.code).toBe("VALIDATION_FAILED");
    const pointers = unknown.body.errors.map((e: any) => e.pointer);
    expect(pointers).toContain("/tags/1");
    expect(pointers).toContain("/tags/2/colour");

    const badName = await http(server, "POST", "/v1/references", {
      body: { container_id: "CSQU3054383", carrier_code: "MAEU", tags: [{ name: "ok" }, { name: "   " }] },
    });
    expect(badName.status).toBe(422);
    expect(badName.body.errors).toEqual([
      { pointer: "/tags/1/name", code: "TOO_SHORT", message: "name must not be empty" },
    ]);
    expect((await http(server, "GET", "/v1/references")).body.data).toEqual([]);
  });

  it("names the existing tag in a 409", async () => {
    const created = await http(server, "POST", "/v1/tags", { body: { name: "Priority:High" } });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      id: expect.any(String),
      name: "Priority:High",
      created_at: expect.stringMatching(/Z$/),
    });
    const conflict = await http(server, "POST", "/v1/tags", { body: { name: "priority:high" } });
    expect(conflict.status).toBe(409);
    expect(conflict.body.existing_tag).toMatchObject({ id: created.body.id, name: "Priority:High" });
  });

  it("replays a POST with the same Idempotency-Key and body, and refuses the key with another body", async () => {
    const body = { bill_of_lading: "BOL-IDEM", carrier_code: "MAEU" };
    const headers = { "idempotency-key": "create-bol-idem-1" };
    const first = await http(server, "POST", "/v1/references", { body, headers });
    const second = await http(server, "POST", "/v1/references", { body, headers });
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    expect(second.body).toEqual(first.body);
    expect(second.headers.get("idempotent-replayed")).toBe("true");
    // The replay names the created resource like the first answer did.
    expect(first.headers.get("location")).toBe(`/v1/references/${first.body.reference.id}`);
    expect(second.headers.get("location")).toBe(first.headers.get("location"));
    const listed = await http(server, "GET", "/v1/references?bill_of_lading=BOL-IDEM");
    expect(listed.body.data).toHaveLength(1);

    const reused = await http(server, "POST", "/v1/references", { body: { ...body, carrier_code: "MSCU" }, headers });
    expect(reused.status).toBe(422);
    expect(reused.body.code).toBe("IDEMPOTENCY_KEY_REUSED");

    const parallel = await Promise.all(
      Array.from({ length: 5 }, () =>
        http(server, "POST", "/v1/references", {
          body: { booking_number: "BK-PAR", carrier_code: "MAEU" },
          headers: { "idempotency-key": "parallel-1" },
        }),
      ),
    );
    for (const result of parallel) expect([201, 409]).toContain(result.status);
    expect((await http(server, "GET", "/v1/references?booking_number=BK-PAR")).body.data).toHaveLength(1);
  });

  it("sends WWW-Authenticate with every 401, naming Bearer and X-API-Key (GraphQL too)", async () => {
    for (const apiKey of [null, "rt_wrong"]) {
      const result = await http(server, "POST", "/v1/tags", { apiKey, body: { name: "x" } });
      expect(result.status).toBe(401);
      expect(result.headers.get("www-authenticate")).toMatch(/^Bearer realm="reftrail"/);
      expect(result.headers.get("www-authenticate")).toContain("X-API-Key");
    }
    // GraphQL answers with the same challenge.
    const graphql = await fetch(`${server.url}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: "{ __typename }" }),
    });
    expect(graphql.status).toBe(401);
    expect(graphql.headers.get("www-authenticate")).toMatch(/^Bearer realm="reftrail".*X-API-Key/);
  });

  it("sends Location with every creation, and the location reads the created resource", async () => {
    const tag = await http(server, "POST", "/v1/tags", { body: { name: "located" } });
    const reference = await http(server, "POST", "/v1/references", {
      body: { booking_number: "BK-LOC", carrier_code: "MAEU" },
    });
    const referenceId = reference.body.reference.id as string;
    const update = await http(server, "POST", `/v1/references/${referenceId}/updates`, {
      body: { estimated_departure: "2026-12-01T00:00:00Z" },
    });
    const webhook = await http(server, "POST", "/v1/webhooks", { body: { url: "http://127.0.0.1:9/hook" } });
    const expected: [typeof tag, string][] = [
      [tag, tag.body.id],
      [reference, referenceId],
      [update, update.body.id],
      [webhook, webhook.body.id],
    ];
    for (const [created, id] of expected) {
      expect(created.status).toBe(201);
      const location = created.headers.get("location");
      expect(location).toMatch(/^\/v1\//);
      const read = await http(server, "GET", location!);
      expect(read.status).toBe(200);
      expect(read.body.id).toBe(id);
    }
  });

  it("takes repeatable query parameters repeated; ids and types also comma-separated, names never split", async () => {
    const names = ["a,b", "a", "b"];
    const tags = await Promise.all(names.map((name) => http(server, "POST", "/v1/tags", { body: { name } })));
    const [commaTag, aTag, bTag] = tags.map((result) => result.body.id as string);
    const create = (tagIds: string[]) =>
      http(server, "POST", "/v1/references", {
        body: { booking_number: "BK-REPEAT", carrier_code: "MAEU", tags: tagIds.map((id) => ({ id })) },
      });
    const withComma = (await create([commaTag!])).body.reference.id;
    const withBoth = (await create([aTag!, bTag!])).body.reference.id;
    const ids = async (query: string) =>
      (await http(server, "GET", `/v1/references?booking_number=BK-REPEAT&${query}`)).body.data.map(
        (reference: { id: string }) => reference.id,
      );

    // A name is taken whole, commas included; several names are several parameters.
    expect(await ids("tag_names=a,b")).toEqual([withComma]);
    expect(await ids("tag_names=a&tag_names=b")).toEqual([withBoth]);
    // Ids may be repeated or comma-separated: both mean the same.
    expect(await ids(`tag_ids=${aTag}&tag_ids=${bTag}`)).toEqual([withBoth]);
    expect(await ids(`tag_ids=${aTag},${bTag}`)).toEqual([withBoth]);

    // Event types likewise.
    const events = (query: string) => http(server, "GET", `/v1/references/${withBoth}/events?${query}`);
    const repeated = await events("type=reference_created&type=extraction_failed");
    expect(repeated.status).toBe(200);
    expect(repeated.body.data.map((event: { type: string }) => event.type)).toEqual(["reference_created"]);
    expect((await events("type=reference_created,extraction_failed")).body).toEqual(repeated.body);
    const unknown = await events("type=reference_created&type=reference_exploded");
    expect(unknown.status).toBe(400);
    expect(unknown.body.code).toBe("INVALID_EVENT_TYPE");
  });

  it("serves an OpenAPI document generated from the route schemas", async () => {
    const result = await http(server, "GET", "/v1/openapi.json", { apiKey: null });
    expect(result.status).toBe(200);
    expect(result.body.openapi).toMatch(/^3\./);
    const paths = Object.keys(result.body.paths);
    for (const path of [
      "/v1/tags",
      "/v1/tags/{tagId}",
      "/v1/tags/{tagId}/references",
      "/v1/references",
      "/v1/references/{referenceId}",
      "/v1/references/{referenceId}/tags",
      "/v1/references/{referenceId}/tags/{tagId}",
      "/v1/references/{referenceId}/events",
      "/v1/references/{referenceId}/extractions",
      "/v1/references/{referenceId}/updates",
      "/v1/references/{referenceId}/children",
    ]) {
      expect(paths).toContain(path);
    }
    const limit = result.body.paths["/v1/references/{referenceId}/events"].get.parameters.find(
      (p: any) => p.name === "limit",
    );
    expect(limit.schema).toMatchObject({ minimum: 1, maximum: 500, default: 50 });
  });

  it("serves health, readiness and Prometheus metrics without a key", async () => {
    expect((await http(server, "GET", "/healthz", { apiKey: null })).body).toEqual({ status: "ok" });
    expect((await http(server, "GET", "/readyz", { apiKey: null })).body).toMatchObject({
      status: "ready",
      database: kind,
    });
    const metrics = await http(server, "GET", "/metrics", { apiKey: null });
    expect(metrics.status).toBe(200);
    expect(String(metrics.body)).toContain("reftrail_http_request_duration_seconds");
  });

  it("answers an unknown path with a 404 problem", async () => {
    const result = await http(server, "GET", "/v1/nothing-here");
    expect(result.status).toBe(404);
    expect(result.body.code).toBe("NOT_FOUND");
  });
});

describe("rate limiting", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer("sqlite", { env: { RATE_LIMIT_PER_MINUTE: "3" } });
  });
  afterAll(async () => server?.close());

  it("answers 429 with Retry-After per key once the limit is spent", async () => {
    const statuses: number[] = [];
    let last;
    for (let i = 0; i < 4; i++) {
      last = await http(server, "GET", "/v1/tags");
      statuses.push(last.status);
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(Number(last!.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(last!.body.code).toBe("RATE_LIMITED");
    const other = await server.newOrganization("other");
    expect((await http(server, "GET", "/v1/tags", { apiKey: other.apiKey })).status).toBe(200);
  });
});
