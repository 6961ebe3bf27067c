import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomUUID } from "node:crypto";
import { GRAPHQL_FIELD_SCOPES, REST_ROUTE_SCOPES } from "../src/pipeline/access/scopes.ts";
import { API_KEY_SCOPES, type ApiKeyScope } from "../src/domain/organizations/api-key-scopes.ts";
import { buildGraphqlSchema } from "../src/graphql/schema.ts";
import { gql } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, ManualClock, startTestServer, type TestServer } from "./support/test-server.ts";
import { withLabel } from "./support/with-label.ts";

/*
 * Least privilege (SPEC §3.1, issue 48): keys with scopes, managed by their organization, through the public
 * surfaces on a real server. Every row of the scope table is exercised: a key without the row's scope is refused
 * with 403 FORBIDDEN naming it, before anything runs.
 */

const ENV = { WEBHOOK_WORKER: "off" };

describe.each(DATABASE_KINDS)("API key scopes on %s", (kind) => {
  let server: TestServer;
  const clock = new ManualClock(new Date());

  beforeAll(async () => {
    server = await startTestServer(kind, { env: ENV, clock });
  });
  afterAll(async () => {
    await server?.close();
  });

  async function createKey(
    scopes: readonly string[],
    extra: Record<string, unknown> = {},
    as: string = server.apiKey,
  ): Promise<{ id: string; key: string; prefix: string }> {
    const created = await http(server, "POST", "/v1/api-keys", {
      apiKey: as,
      body: { name: `key of ${scopes.length} scopes`, scopes, ...extra },
    });
    expectStatus(created, 201);
    return created.body;
  }

  it("refuses every route its key lacks the scope of with 403 FORBIDDEN naming the scope (the whole table)", async () => {
    // One key per scope: each route is called with a key holding every scope but the one it needs.
    const keyWithout = new Map<ApiKeyScope, string>();
    for (const scope of API_KEY_SCOPES) {
      keyWithout.set(scope, (await createKey(API_KEY_SCOPES.filter((each) => each !== scope))).key);
    }
    const rows = Object.entries(REST_ROUTE_SCOPES);
    expect(rows.length).toBeGreaterThan(40);
    for (const [route, scope] of rows) {
      const [method, pattern] = route.split(" ") as [string, string];
      const path = pattern.replace(/:[A-Za-z]+/g, () => randomUUID());
      if (scope === null) {
        const open = await http(server, method, path, { apiKey: keyWithout.get("references:read")! });
        withLabel(route, () => expect(open.status).not.toBe(403));
        continue;
      }
      const body = method === "GET" ? undefined : {};
      const refused = await http(server, method, path, { apiKey: keyWithout.get(scope)!, body });
      withLabel(route, () => {
        expect(refused.status).toBe(403);
        expect(refused.body).toMatchObject({ code: "FORBIDDEN", required_scope: scope });
      });
    }
  });

  it("has no row for a route the server does not serve (the server refuses to start with a route without one)", () => {
    for (const route of Object.keys(REST_ROUTE_SCOPES)) {
      const [method, url] = route.split(" ") as [string, string];
      withLabel(route, () => expect(server.app.http.hasRoute({ method: method as "GET", url })).toBe(true));
    }
  });

  it("lets a references:read key read and refuses every write, webhook, key and audit route, writing nothing", async () => {
    const reader = await createKey(["references:read"]);
    expectStatus(await http(server, "GET", "/v1/tags", { apiKey: reader.key }), 200);
    expectStatus(await http(server, "GET", "/v1/references", { apiKey: reader.key }), 200);
    for (const [method, path, body, scope] of [
      ["POST", "/v1/tags", { name: "refused" }, "references:write"],
      ["POST", "/v1/references", { booking_number: "BK-REFUSED", carrier_code: "MAEU" }, "references:write"],
      ["POST", "/v1/webhooks", { url: "https://example.com/hook" }, "webhooks:write"],
      ["GET", "/v1/webhooks", undefined, "webhooks:read"],
      ["POST", "/v1/api-keys", { name: "x", scopes: ["references:read"] }, "keys:write"],
      ["GET", "/v1/api-keys", undefined, "keys:read"],
      ["GET", "/v1/audit-events", undefined, "audit:read"],
    ] as const) {
      const refused = await http(server, method, path, { apiKey: reader.key, body });
      withLabel(`${method} ${path}`, () => {
        expect(refused.status).toBe(403);
        expect(refused.body).toMatchObject({ code: "FORBIDDEN", required_scope: scope });
      });
    }
    const tags = await http(server, "GET", "/v1/tags?name_prefix=refused", { apiKey: reader.key });
    expect(tags.body.data).toEqual([]);
    const endpoints = await http(server, "GET", "/v1/webhooks");
    expect(endpoints.body.data).toEqual([]);
  });

  it("answers a GraphQL field outside the key's scopes with FORBIDDEN on that field, the rest standing", async () => {
    const reader = await createKey(["references:read"]);
    const answer = await gql(
      server,
      `{ tags(first: 1) { edges { node { id } } } webhookEndpoints(first: 1) { edges { node { id } } } }`,
      {},
      { apiKey: reader.key },
    );
    withLabel(JSON.stringify(answer.body), () => expect(answer.body.data?.tags).toEqual({ edges: expect.any(Array) }));
    expect(answer.body.errors).toHaveLength(1);
    expect(answer.body.errors![0]).toMatchObject({
      path: ["webhookEndpoints"],
      extensions: { code: "FORBIDDEN", requiredScope: "webhooks:read" },
    });
    const write = await gql(
      server,
      `mutation { createTag(input: { name: "refused-gql" }) { tag { id } } }`,
      {},
      { apiKey: reader.key },
    );
    expect(write.body.errors![0]).toMatchObject({
      path: ["createTag"],
      extensions: { code: "FORBIDDEN", requiredScope: "references:write" },
    });
    const tags = await http(server, "GET", "/v1/tags?name_prefix=refused-gql");
    expect(tags.body.data).toEqual([]);
  });

  it("checks node and nodes by the type each object resolves to", async () => {
    const endpoint = await http(server, "POST", "/v1/webhooks", { body: { url: "https://example.com/node-hook" } });
    expectStatus(endpoint, 201);
    const tag = await http(server, "POST", "/v1/tags", { body: { name: "node-tag" } });
    expectStatus(tag, 201);
    const reader = await createKey(["references:read"]);
    const single = await gql(
      server,
      `query ($id: ID!) { node(id: $id) { id } }`,
      { id: endpoint.body.id },
      {
        apiKey: reader.key,
      },
    );
    expect(single.body.data).toEqual({ node: null });
    expect(single.body.errors![0]).toMatchObject({
      path: ["node"],
      extensions: { code: "FORBIDDEN", requiredScope: "webhooks:read" },
    });
    const many = await gql(
      server,
      `query ($ids: [ID!]!) { nodes(ids: $ids) { id } }`,
      { ids: [tag.body.id, endpoint.body.id] },
      { apiKey: reader.key },
    );
    expect(many.body.data).toEqual({ nodes: [{ id: tag.body.id }, null] });
    expect(many.body.errors![0]).toMatchObject({
      path: ["nodes", 1],
      extensions: { code: "FORBIDDEN", requiredScope: "webhooks:read" },
    });
  });

  it("has a row for every GraphQL root field", () => {
    const schema = buildGraphqlSchema();
    for (const type of [schema.getQueryType()!, schema.getMutationType()!, schema.getSubscriptionType()!]) {
      for (const field of Object.keys(type.getFields())) {
        withLabel(`${type.name}.${field}`, () =>
          expect(GRAPHQL_FIELD_SCOPES).toHaveProperty([`${type.name}.${field}`]),
        );
      }
    }
  });

  it("creates keys with only the scopes the creator holds, shows a key once, and keeps other organizations' keys 404", async () => {
    const manager = await createKey(["keys:write", "keys:read", "references:read"]);
    const escalation = await http(server, "POST", "/v1/api-keys", {
      apiKey: manager.key,
      body: { name: "escalate", scopes: ["references:read", "webhooks:write"] },
    });
    expect(escalation.status).toBe(403);
    expect(escalation.body).toMatchObject({ code: "FORBIDDEN", required_scope: "webhooks:write" });

    const created = await createKey(["references:read"], {}, manager.key);
    expect(created.key).toMatch(/^rt_/);
    expect(created).toMatchObject({ prefix: created.key.slice(0, 8), scopes: ["references:read"], last_used_at: null });

    const list = await http(server, "GET", "/v1/api-keys", { apiKey: manager.key });
    expectStatus(list, 200);
    expect(JSON.stringify(list.body)).not.toContain(created.key);
    expect(list.body.data.map((key: { id: string }) => key.id)).toContain(created.id);
    for (const key of list.body.data) expect(key).not.toHaveProperty("key");
    const read = await http(server, "GET", `/v1/api-keys/${created.id}`, { apiKey: manager.key });
    expectStatus(read, 200);
    expect(read.body).not.toHaveProperty("key");

    const other = await server.newOrganization("other");
    expectStatus(await http(server, "GET", `/v1/api-keys/${created.id}`, { apiKey: other.apiKey }), 404);
    expectStatus(await http(server, "DELETE", `/v1/api-keys/${created.id}`, { apiKey: other.apiKey }), 404);
    const otherList = await http(server, "GET", "/v1/api-keys", { apiKey: other.apiKey });
    expect(otherList.body.data.map((key: { id: string }) => key.id)).not.toContain(created.id);
  });

  it("manages keys over GraphQL the same way", async () => {
    const manager = await createKey(["keys:write", "keys:read", "references:read"]);
    const as = { url: server.url, apiKey: manager.key };
    const CREATE = `mutation ($input: CreateApiKeyInput!) {
      createApiKey(input: $input) { key apiKey { id prefix scopes expiresAt lastUsedAt revokedAt } } }`;
    const escalation = await gql(as, CREATE, { input: { name: "x", scopes: ["REFERENCES_READ", "AUDIT_READ"] } });
    expect(escalation.body.errors![0]).toMatchObject({
      path: ["createApiKey"],
      extensions: { code: "FORBIDDEN", requiredScope: "audit:read" },
    });
    const past = await gql(as, CREATE, {
      input: { name: "x", scopes: ["REFERENCES_READ"], expiresAt: "2000-01-01T00:00:00.000Z" },
    });
    expect(past.body.errors![0]!.extensions!.code).toBe("VALIDATION_FAILED");
    const created = await gql(as, CREATE, { input: { name: "gql", scopes: ["REFERENCES_READ"] } });
    expect(created.body.errors).toBeUndefined();
    const { key, apiKey } = created.body.data.createApiKey;
    expect(apiKey).toMatchObject({ prefix: key.slice(0, 8), scopes: ["REFERENCES_READ"], revokedAt: null });

    const listed = await gql(as, `{ apiKeys { id prefix } apiKey(id: "${apiKey.id}") { id } }`);
    expect(JSON.stringify(listed.body)).not.toContain(key);
    expect(listed.body.data.apiKey).toEqual({ id: apiKey.id });
    const other = await server.newOrganization("gql-other");
    const foreign = await gql({ url: server.url, apiKey: other.apiKey }, `{ apiKey(id: "${apiKey.id}") { id } }`);
    expect(foreign.body.data).toEqual({ apiKey: null });

    const revoked = await gql(as, `mutation { revokeApiKey(id: "${apiKey.id}") { apiKey { revokedAt } } }`);
    expect(revoked.body.data.revokeApiKey.apiKey.revokedAt).toEqual(expect.any(String));
    expect((await http({ url: server.url, apiKey: key }, "GET", "/v1/tags")).status).toBe(401);
  });

  it("revokes a key: its next request answers 401", async () => {
    const victim = await createKey(["references:read"]);
    expectStatus(await http(server, "GET", "/v1/tags", { apiKey: victim.key }), 200);
    expectStatus(await http(server, "DELETE", `/v1/api-keys/${victim.id}`), 204);
    const refused = await http(server, "GET", "/v1/tags", { apiKey: victim.key });
    expect(refused.status).toBe(401);
    expect(refused.body.code).toBe("UNAUTHENTICATED");
    const listed = await http(server, "GET", `/v1/api-keys/${victim.id}`);
    expect(listed.body.revoked_at).not.toBeNull();
  });

  it("refuses an expires_at in the past with 422, and a key past its expiry with 401 saying it expired", async () => {
    const past = await http(server, "POST", "/v1/api-keys", {
      body: {
        name: "past",
        scopes: ["references:read"],
        expires_at: new Date(clock.now().getTime() - 1000).toISOString(),
      },
    });
    expect(past.status).toBe(422);
    const expiring = await createKey(["references:read"], {
      expires_at: new Date(clock.now().getTime() + 3_600_000).toISOString(),
    });
    expectStatus(await http(server, "GET", "/v1/tags", { apiKey: expiring.key }), 200);
    clock.advance(2 * 3_600_000);
    const refused = await http(server, "GET", "/v1/tags", { apiKey: expiring.key });
    expect(refused.status).toBe(401);
    expect(refused.body.detail).toMatch(/expired/);
    const overGraphql = await gql(server, `{ tags(first: 1) { edges { cursor } } }`, {}, { apiKey: expiring.key });
    expect(overGraphql.body.errors![0]!.message).toMatch(/expired/);
  });
});
