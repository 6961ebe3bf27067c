import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gql } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * The audit log (SPEC §3.1, issue 48): administrative changes made through REST and GraphQL are listed newest
 * first with the acting key, the target and what changed, never a secret or a key, and only to their own
 * organization.
 */

describe.each(DATABASE_KINDS)("the audit log on %s", (kind) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer(kind, { env: { WEBHOOK_WORKER: "off" } });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("lists endpoint creation, URL change, secret rotation, key creation and revocation with the acting key, newest first, without secrets", async () => {
    const adminCreated = await http(server, "POST", "/v1/api-keys", {
      body: {
        name: "admin",
        scopes: ["webhooks:write", "webhooks:read", "keys:write", "keys:read", "audit:read", "references:read"],
      },
    });
    expectStatus(adminCreated, 201);
    const admin = { url: server.url, apiKey: adminCreated.body.key as string };
    const adminId = adminCreated.body.id as string;
    const adminPrefix = adminCreated.body.prefix as string;

    const endpoint = await http(admin, "POST", "/v1/webhooks", {
      body: { url: "http://hooks.example.com:8080/first?token=abc" },
    });
    expectStatus(endpoint, 201);
    const secrets: string[] = [endpoint.body.secret];
    expectStatus(
      await http(admin, "PATCH", `/v1/webhooks/${endpoint.body.id}`, {
        body: { url: "http://hooks.example.com:8080/second" },
      }),
      200,
    );
    const rotated = await http(admin, "POST", `/v1/webhooks/${endpoint.body.id}/rotate-secret`);
    expectStatus(rotated, 200);
    secrets.push(rotated.body.secret);
    const key = await http(admin, "POST", "/v1/api-keys", { body: { name: "reader", scopes: ["references:read"] } });
    expectStatus(key, 201);
    secrets.push(key.body.key);
    expectStatus(await http(admin, "DELETE", `/v1/api-keys/${key.body.id}`), 204);

    const listed = await http(admin, "GET", "/v1/audit-events");
    expectStatus(listed, 200);
    const mine = listed.body.data.filter(
      (event: { actor: { api_key_id?: string } }) => event.actor.api_key_id === adminId,
    );
    expect(mine.map((event: { action: string }) => event.action)).toEqual([
      "api_key.revoked",
      "api_key.created",
      "webhook_endpoint.secret_rotated",
      "webhook_endpoint.updated",
      "webhook_endpoint.created",
    ]);
    for (const event of mine) {
      expect(event.actor).toEqual({ api_key_id: adminId, prefix: adminPrefix });
      expect(typeof event.request_id).toBe("string");
    }
    const updated = mine[3];
    expect(updated.target).toEqual({ type: "webhook_endpoint", id: endpoint.body.id });
    expect(updated.changes.url).toEqual({
      from: "http://hooks.example.com:8080/first?token=abc",
      to: "http://hooks.example.com:8080/second",
    });
    expect(mine[1].target).toEqual({ type: "api_key", id: key.body.id });
    expect(mine[1].changes.scopes).toEqual({ from: null, to: ["references:read"] });
    const text = JSON.stringify(listed.body);
    for (const secret of secrets) expect(text).not.toContain(secret);
    // The admin's own creation, made with the server's first key, is listed before (older than) its changes.
    expect(listed.body.data.at(-1)).toMatchObject({ action: "api_key.created", target: { id: adminId } });

    // Filters and pages.
    const onlyUpdates = await http(admin, "GET", "/v1/audit-events?action=webhook_endpoint.updated");
    expect(onlyUpdates.body.data.map((event: { id: string }) => event.id)).toEqual([updated.id]);
    const byKey = await http(admin, "GET", `/v1/audit-events?api_key_id=${adminId}&limit=2`);
    expect(byKey.body.data.map((event: { id: string }) => event.id)).toEqual([mine[0].id, mine[1].id]);
    const next = await http(
      admin,
      "GET",
      `/v1/audit-events?api_key_id=${adminId}&limit=2&cursor=${byKey.body.next_cursor}`,
    );
    expect(next.body.data.map((event: { id: string }) => event.id)).toEqual([mine[2].id, mine[3].id]);
    expect((await http(admin, "GET", "/v1/audit-events?action=nope")).status).toBe(422);

    // GraphQL reads the same log.
    const overGraphql = await gql(
      admin,
      `{ auditEvents(first: 5, filter: { apiKeyId: "${adminId}" }) {
          edges { node { action actorApiKeyId actorKeyPrefix actorCli targetType targetId changes requestId } } } }`,
    );
    expect(overGraphql.body.errors).toBeUndefined();
    expect(
      overGraphql.body.data.auditEvents.edges.map((edge: { node: { action: string } }) => edge.node.action),
    ).toEqual(mine.map((event: { action: string }) => event.action));
    expect(overGraphql.body.data.auditEvents.edges[0].node).toMatchObject({
      actorApiKeyId: adminId,
      actorKeyPrefix: adminPrefix,
      actorCli: false,
      targetType: "api_key",
    });

    // Another organization sees none of it.
    const other = await server.newOrganization("elsewhere");
    const theirs = await http({ url: server.url, apiKey: other.apiKey }, "GET", "/v1/audit-events");
    expectStatus(theirs, 200);
    expect(theirs.body.data).toEqual([]);
  });

  it("records changes made through GraphQL, with the request id, and deletions of tags and endpoints", async () => {
    const created = await gql(
      server,
      `mutation { createWebhookEndpoint(input: { url: "http://hooks.example.com/gql" }) { webhookEndpoint { id } secret } }`,
    );
    expect(created.body.errors).toBeUndefined();
    const endpointId = created.body.data.createWebhookEndpoint.webhookEndpoint.id as string;
    const tag = await http(server, "POST", "/v1/tags", { body: { name: "audited-tag" } });
    expectStatus(await http(server, "DELETE", `/v1/tags/${tag.body.id}`), 204);
    expectStatus(await http(server, "DELETE", `/v1/webhooks/${endpointId}`), 204);

    const listed = await http(server, "GET", "/v1/audit-events?limit=3");
    expect(listed.body.data.map((event: { action: string }) => event.action)).toEqual([
      "webhook_endpoint.deleted",
      "tag.deleted",
      "webhook_endpoint.created",
    ]);
    expect(listed.body.data[1].target).toEqual({ type: "tag", id: tag.body.id });
    expect(listed.body.data[2].request_id).toEqual(expect.any(String));
    expect(JSON.stringify(listed.body)).not.toContain(created.body.data.createWebhookEndpoint.secret);
  });

  it("records the operator's key creation and revocation (the reftrail command's service) as the CLI's", async () => {
    const organizations = server.app.services.organizations;
    const issued = await organizations.createApiKey(server.organizationId, {
      scopes: new Set(["references:read"] as const),
    });
    await organizations.revokeApiKey(issued.id);
    const listed = await http(server, "GET", "/v1/audit-events?limit=2");
    expect(listed.body.data).toMatchObject([
      { action: "api_key.revoked", actor: { cli: true }, target: { id: issued.id }, request_id: null },
      { action: "api_key.created", actor: { cli: true }, target: { id: issued.id }, request_id: null },
    ]);
    expect(JSON.stringify(listed.body)).not.toContain(issued.key);
  });

  it("refuses the log to a key without audit:read, over REST and GraphQL", async () => {
    const key = await http(server, "POST", "/v1/api-keys", { body: { name: "no audit", scopes: ["references:read"] } });
    const refused = await http({ url: server.url, apiKey: key.body.key }, "GET", "/v1/audit-events");
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ code: "FORBIDDEN", required_scope: "audit:read" });
    const overGraphql = await gql({ url: server.url, apiKey: key.body.key }, `{ auditEvents { edges { cursor } } }`);
    expect(overGraphql.body.errors![0]).toMatchObject({
      path: ["auditEvents"],
      extensions: { code: "FORBIDDEN", requiredScope: "audit:read" },
    });
  });
});
