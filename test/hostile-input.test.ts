import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { gql } from "./support/graphql-client.ts";
import { http } from "./support/http.ts";
import { subscribe } from "./support/subscription-client.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Hostile input (issue 10): whatever a client sends, the answer is a precise 4xx with a pointer, never a 500,
 * on both databases and through REST, GraphQL over HTTP and graphql-ws.
 */

let serial = 0;
function containerNumber(): string {
  serial += 1;
  const firstTen = `HSTU${String(serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

/** A JSON body whose `key` holds arrays nested `depth` deep, written by hand (JSON.stringify would recurse). */
function deeplyNested(key: string, depth: number): string {
  return `{"${key}":${"[".repeat(depth)}${"]".repeat(depth)}}`;
}

const ADD_TAGS = `mutation ($input: AddTagsToReferenceInput!) {
  addTagsToReference(input: $input) { reference { id tags { id name } } }
}`;
const CREATE_REFERENCE = `mutation ($input: CreateReferenceInput!) {
  createReference(input: $input) { reference { id } }
}`;
const RECORD_UPDATE = `mutation ($input: RecordReferenceUpdateInput!) {
  recordReferenceUpdate(input: $input) { update { id } }
}`;

describe.each(DATABASE_KINDS)("hostile input on %s", (kind) => {
  let server: TestServer;
  let referenceId: string;

  beforeAll(async () => {
    // Loopback refused as in production (its default allow-list is empty); a high per-reference limit, so that
    // requests with many distinct tags reach the database and exercise its parameter limits.
    server = await startTestServer(kind, { env: { WEBHOOK_ALLOWED_CIDRS: "", MAX_TAGS_PER_REFERENCE: "2000" } });
    const created = await http(server, "POST", "/v1/references", {
      body: { container_id: containerNumber(), carrier_code: "MSCU" },
    });
    expect(created.status).toBe(201);
    referenceId = created.body.reference.id;
  }, 60_000);

  afterAll(async () => {
    await server?.close();
  });

  async function referenceCount(): Promise<number> {
    const { body } = await http(server, "GET", "/v1/references?limit=500");
    return body.data.length;
  }

  describe("many tag entries in one request", () => {
    const entries = (count: number, prefix: string) =>
      Array.from({ length: count }, (_, index) => ({ name: `${prefix}-${index}` }));

    it("refuses more than 1,000 entries with LIMIT_EXCEEDED before touching the database (REST)", async () => {
      const before = await referenceCount();
      const created = await http(server, "POST", "/v1/references", {
        body: { container_id: containerNumber(), carrier_code: "MSCU", tags: entries(1_001, "rc") },
      });
      expect(created.status).toBe(422);
      expect(created.body).toMatchObject({ code: "LIMIT_EXCEEDED", limit: 1_000 });
      expect(created.body.errors[0].pointer).toBe("/tags");
      expect(await referenceCount()).toBe(before);

      const added = await http(server, "POST", `/v1/references/${referenceId}/tags`, {
        body: { tags: entries(1_500, "ra") },
      });
      expect(added.status).toBe(422);
      expect(added.body.code).toBe("LIMIT_EXCEEDED");
      expect(added.body.errors[0].pointer).toBe("/tags");
    });

    it("refuses more than 1,000 entries with LIMIT_EXCEEDED (GraphQL)", async () => {
      const created = await gql(server, CREATE_REFERENCE, {
        input: { containerId: containerNumber(), carrierCode: "MSCU", tags: entries(1_001, "gc") },
      });
      expect(created.body.errors?.[0]?.extensions).toMatchObject({ code: "LIMIT_EXCEEDED", field: "input.tags" });
      const added = await gql(server, ADD_TAGS, { input: { referenceId, tags: entries(1_200, "ga") } });
      expect(added.body.errors?.[0]?.extensions).toMatchObject({ code: "LIMIT_EXCEEDED", field: "input.tags" });
    });

    it("refuses more distinct tags than a reference may carry, before the database", async () => {
      const limited = await startTestServer(kind, { env: { MAX_TAGS_PER_REFERENCE: "5" } });
      try {
        const rest = await http(limited, "POST", "/v1/references", {
          body: { container_id: containerNumber(), carrier_code: "MSCU", tags: entries(6, "d") },
        });
        expect(rest.status).toBe(422);
        expect(rest.body).toMatchObject({ code: "LIMIT_EXCEEDED", limit: 5 });
        // The same name six times is one tag.
        const same = await http(limited, "POST", "/v1/references", {
          body: { container_id: containerNumber(), carrier_code: "MSCU", tags: Array(6).fill({ name: "same" }) },
        });
        expect(same.status).toBe(201);
        expect(same.body.reference.tags).toHaveLength(1);
      } finally {
        await limited.close();
      }
    });

    it("adds and reads 1,000 distinct tags on one reference: long IN lists are chunked", async () => {
      const created = await http(server, "POST", "/v1/references", {
        body: { container_id: containerNumber(), carrier_code: "MSCU", tags: entries(1_000, "many") },
      });
      expect(created.status).toBe(201);
      expect(created.body.reference.tags).toHaveLength(1_000);
      // The same names again, found case-insensitively in one lookup of 1,000 keys.
      const again = await gql(server, ADD_TAGS, {
        input: { referenceId: created.body.reference.id, tags: entries(1_000, "MANY") },
      });
      expect(again.body.errors).toBeUndefined();
      expect(again.body.data.addTagsToReference.reference.tags).toHaveLength(1_000);
    });

    it("refuses a tag filter of more than 100 values with a 400 naming the parameter", async () => {
      const ids = Array.from({ length: 101 }, (_, i) => `01900000-0000-7000-8000-${String(i).padStart(12, "0")}`);
      const rest = await http(server, "GET", `/v1/references?${ids.map((id) => `tag_ids=${id}`).join("&")}`);
      expect(rest.status).toBe(400);
      expect(rest.body.code).toBe("INVALID_QUERY_PARAMETER");
      expect(rest.body.errors[0].pointer).toBe("tag_ids");
      const graphql = await gql(
        server,
        `query ($ids: [ID!]) { references(filter: { tagIds: $ids }) { edges { node { id } } } }`,
        { ids: Array.from({ length: 1_500 }, (_, i) => ids[i % ids.length]) },
      );
      expect(graphql.body.errors?.[0]?.extensions).toMatchObject({
        code: "BAD_USER_INPUT",
        field: "filter.tagIds",
      });
      // Exclusions are bounded the same way.
      const excluded = await http(
        server,
        "GET",
        `/v1/references?${ids.map((id) => `exclude_tag_ids=${id}`).join("&")}`,
      );
      expect(excluded.status).toBe(400);
      expect(excluded.body.errors[0].pointer).toBe("exclude_tag_ids");
      const excludedGraphql = await gql(
        server,
        `query ($names: [String!]) { references(filter: { excludeTagNames: $names }) { edges { node { id } } } }`,
        { names: Array.from({ length: 101 }, (_, i) => `tag-${i}`) },
      );
      expect(excludedGraphql.body.errors?.[0]?.extensions).toMatchObject({
        code: "BAD_USER_INPUT",
        field: "filter.excludeTagNames",
      });
    });
  });

  describe("lone UTF-16 surrogates", () => {
    const LONE = '"bad\\ud800text"';
    const raw = (fields: string) => ({ rawBody: `{${fields}}`, headers: { "content-type": "application/json" } });

    it("are refused in any REST body string with 422 and a pointer to the field", async () => {
      const cases: [string, string, string, string][] = [
        ["POST", "/v1/tags", `"name":${LONE}`, "/name"],
        ["POST", "/v1/references", `"container_id":"${containerNumber()}","carrier_code":${LONE}`, "/carrier_code"],
        ["POST", `/v1/references/${referenceId}/tags`, `"tags":[{"name":"ok"},{"name":${LONE}}]`, "/tags/1/name"],
        ["POST", `/v1/references/${referenceId}/updates`, `"notes":{"deep":[${LONE}]}`, "/notes/deep/0"],
        ["POST", `/v1/references/${referenceId}/updates`, `${LONE}:1`, "/bad\ud800text"],
        ["POST", "/v1/webhooks", `"url":"https://example.com/hook","description":${LONE}`, "/description"],
        [
          "POST",
          `/v1/references/${referenceId}/extractions`,
          `"status":"failed","error":{"code":"x","message":${LONE}}`,
          "/error/message",
        ],
      ];
      for (const [method, path, fields, pointer] of cases) {
        const response = await http(server, method, path, raw(fields));
        expect({ path, status: response.status }).toEqual({ path, status: 422 });
        expect(response.body.code).toBe("VALIDATION_FAILED");
        expect(response.body.errors[0]).toMatchObject({ pointer, code: "INVALID_UNICODE" });
      }
    });

    it("are refused in GraphQL variables with VALIDATION_FAILED naming the variable's path", async () => {
      const tag = await gql(server, `mutation ($name: String!) { createTag(input: { name: $name }) { tag { id } } }`, {
        name: "bad\ud800",
      });
      expect(tag.status).toBe(400);
      expect(tag.body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED", field: "name" });
      const added = await gql(server, ADD_TAGS, { input: { referenceId, tags: [{ name: "ok" }, { name: "\udc00" }] } });
      expect(added.body.errors?.[0]?.extensions).toMatchObject({
        code: "VALIDATION_FAILED",
        field: "input.tags.1.name",
      });
      const update = await gql(server, RECORD_UPDATE, { input: { referenceId, update: { note: "\ud800" } } });
      expect(update.body.errors?.[0]?.extensions).toMatchObject({ field: "input.update.note" });
    });

    it("are refused in GraphQL literals by the parser", async () => {
      const { status, body } = await gql(
        server,
        `mutation { createTag(input: { name: "bad\\ud800" }) { tag { id } } }`,
      );
      expect(status).toBe(400);
      expect(body.errors?.[0]?.extensions?.code).toBe("GRAPHQL_PARSE_FAILED");
    });
  });

  describe("deeply nested JSON", () => {
    it("is refused with 422 naming the nesting cap of 32 (REST), and 32 levels are accepted", async () => {
      const response = await http(server, "POST", `/v1/references/${referenceId}/updates`, {
        rawBody: deeplyNested("notes", 100_000),
        headers: { "content-type": "application/json" },
      });
      expect(response.status).toBe(422);
      expect(response.body).toMatchObject({ code: "VALIDATION_FAILED", limit: 32 });
      expect(response.body.errors[0].code).toBe("TOO_DEEP");
      expect(response.body.errors[0].pointer).toMatch(/^\/notes(\/0){31}$/);

      // The body is level 1, so `notes` may hold 31 levels of arrays.
      const deepest = await http(server, "POST", `/v1/references/${referenceId}/updates`, {
        rawBody: deeplyNested("notes", 31),
        headers: { "content-type": "application/json" },
      });
      expect(deepest.status).toBe(201);
    });

    it("is refused in a GraphQL JSON variable with VALIDATION_FAILED and the cap", async () => {
      const body = `{"query":${JSON.stringify(RECORD_UPDATE)},"variables":{"input":{"referenceId":"${referenceId}","update":${deeplyNested("notes", 100_000)}}}}`;
      const response = await http(server, "POST", "/graphql", {
        rawBody: body,
        headers: { "content-type": "application/json" },
      });
      expect(response.status).toBe(400);
      expect(response.body.errors[0].extensions).toMatchObject({ code: "VALIDATION_FAILED", limit: 32 });
      expect(response.body.errors[0].extensions.field).toMatch(/^input\.update\.notes(\.0)+$/);
    });
  });

  it("answers BAD_USER_INPUT for a @oneOf tag entry whose field is a null variable", async () => {
    const { body } = await gql(
      server,
      `mutation ($n: String) { addTagsToReference(input: { referenceId: "${referenceId}", tags: [{ name: $n }] }) { reference { id } } }`,
      { n: null },
    );
    expect(body.errors?.[0]?.extensions).toMatchObject({ code: "BAD_USER_INPUT", field: "input" });
  });

  it("answers Fastify's own errors as problem+json with a code", async () => {
    const tooLong = await http(server, "GET", `/v1/references/${"a".repeat(1_000)}`);
    expect(tooLong.status).toBe(414);
    expect(tooLong.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(tooLong.body).toMatchObject({ status: 414, code: "URI_TOO_LONG" });

    const badUrl = await http(server, "GET", `/v1/references/%E0%A4%A`);
    expect(badUrl.status).toBe(400);
    expect(badUrl.headers.get("content-type")).toMatch(/^application\/problem\+json/);
    expect(badUrl.body).toMatchObject({ status: 400, code: "MALFORMED_REQUEST" });
  });

  it("accepts only decimal integers for integer query parameters, and refuses an empty event type", async () => {
    for (const path of [`/v1/references/${referenceId}/events`, "/v1/references", "/v1/tags", "/v1/webhooks"]) {
      for (const limit of ["1e2", "%205", "5.0", "0x10", "+5", "-0"]) {
        const response = await http(server, "GET", `${path}?limit=${limit}`);
        expect({ path, limit, status: response.status }).toEqual({ path, limit, status: 400 });
        expect(response.body.code).toBe("INVALID_LIMIT");
        expect(response.body.errors[0].pointer).toBe("limit");
      }
      expect((await http(server, "GET", `${path}?limit=5`)).status).toBe(200);
    }
    for (const type of ["", "reference_created,", ",,"]) {
      const response = await http(server, "GET", `/v1/references/${referenceId}/events?type=${type}`);
      expect(response.status).toBe(400);
      expect(response.body.code).toBe("INVALID_EVENT_TYPE");
    }
  });

  it("never shows the parser's internal failure for a deeply nested query document (HTTP and graphql-ws)", async () => {
    const nested = `{ ${'reference(id: "x") { parent { '.repeat(3_000)} id ${"} }".repeat(3_000)} }`;
    const { status, body } = await gql(server, nested);
    expect(status).toBe(400);
    expect(body.errors?.[0]?.extensions?.code).toBe("GRAPHQL_PARSE_FAILED");
    expect(JSON.stringify(body)).not.toMatch(/call stack|RangeError/i);

    const subscription = subscribe(server, `subscription ${nested}`);
    try {
      await subscription.ended;
      expect(subscription.errors[0]?.extensions?.code).toBe("GRAPHQL_PARSE_FAILED");
      expect(JSON.stringify(subscription.errors)).not.toMatch(/call stack|RangeError/i);
      expect(subscription.closeInfo()).toBeUndefined();
    } finally {
      await subscription.dispose();
    }
  });

  it("refuses loopback names in any spelling when loopback is not allowed (as in production)", async () => {
    for (const url of [
      "http://localhost./hook",
      "http://LOCALHOST:8080/hook",
      "https://api.localhost/hook",
      "https://api.localhost../hook",
      "http://127.1/hook",
      "http://0x7f000001/hook",
      "http://[::1]/hook",
      "http://[::ffff:127.0.0.1]/hook",
    ]) {
      const rest = await http(server, "POST", "/v1/webhooks", { body: { url } });
      expect({ url, status: rest.status }).toEqual({ url, status: 422 });
      expect(rest.body.errors[0].pointer).toBe("/url");
      const graphql = await gql(
        server,
        `mutation ($url: String!) { createWebhookEndpoint(input: { url: $url }) { webhookEndpoint { id } } }`,
        { url },
      );
      expect(graphql.body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED", field: "input.url" });
    }
  });
});
