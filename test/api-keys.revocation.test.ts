import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { subscribeOverSse } from "./support/sse-client.ts";
import { eventually, subscribe, waitForOpenSubscriptions } from "./support/subscription-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { gql } from "./support/graphql-client.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Revoking a key (SPEC §3.1) through the organization's own API: at once, on every instance, open subscriptions
 * included; and a subscription the key's scopes do not cover is refused when it starts.
 */

const ENV = {
  SUBSCRIPTION_POLL_INTERVAL: "100ms",
  SUBSCRIPTION_AUTH_RECHECK_INTERVAL: "100ms",
  WEBHOOK_WORKER: "off",
};

const EVENTS = `subscription { lifecycleEvents { cursor node { id } } }`;
const ATTEMPTS = `subscription { webhookDeliveryAttempts { __typename } }`;

describe.each(DATABASE_KINDS)("revoking API keys on %s", (kind) => {
  let first: TestServer;
  let second: TestServer;

  beforeAll(async () => {
    first = await startTestServer(kind, { env: ENV });
    // A second instance on the same database (on SQLite: a second process's view of the same file).
    second = await startInstanceOn(first, { env: ENV });
  });
  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  async function createKey(scopes: readonly string[]): Promise<{ id: string; key: string }> {
    const created = await http(first, "POST", "/v1/api-keys", { body: { name: "revocable", scopes } });
    expectStatus(created, 201);
    return created.body;
  }

  it("refuses a revoked key on its next request on every instance, and ends its open graphql-ws and SSE subscriptions", async () => {
    const victim = await createKey(["references:read"]);
    const on = (server: TestServer) => ({ url: server.url, apiKey: victim.key });
    expectStatus(await http(on(first), "GET", "/v1/tags"), 200);
    expectStatus(await http(on(second), "GET", "/v1/tags"), 200);

    const overWs = subscribe(on(second), EVENTS);
    const overSse = subscribeOverSse(on(second), EVENTS);
    // Both streams are open (registered, then fed by a write) before the key is revoked on the other instance.
    await waitForOpenSubscriptions(second, 2);
    const created = await http(second, "POST", "/v1/references", {
      body: { booking_number: `BK-REVOKE-${kind}`, carrier_code: "MAEU" },
    });
    expectStatus(created, 201);
    await overWs.waitFor(1);
    await overSse.waitFor(1);

    // Revoked through the first instance.
    expectStatus(await http(first, "DELETE", `/v1/api-keys/${victim.id}`), 204);
    for (const server of [first, second]) {
      const refused = await http(on(server), "GET", "/v1/tags");
      expect(refused.status).toBe(401);
      const overGraphql = await gql(on(server), `{ tags(first: 1) { edges { cursor } } }`);
      expect(overGraphql.body.errors![0]!.extensions!.code).toBe("UNAUTHENTICATED");
    }
    const closed = await overWs.waitForClose();
    expect(closed.code).toBe(4401);
    await overSse.ended;
    try {
      expect(overSse.status()).toBeUndefined();
    } finally {
      await overWs.dispose();
      overSse.dispose();
    }
  });

  it("refuses a subscription the key's scopes do not cover when it starts, over graphql-ws and SSE", async () => {
    const reader = await createKey(["references:read"]);
    const key = { url: first.url, apiKey: reader.key };
    const overWs = subscribe(key, ATTEMPTS);
    const overSse = subscribeOverSse(key, ATTEMPTS);
    try {
      await eventually(() => overWs.errors.length > 0 && overSse.errors.length > 0);
      for (const errors of [overWs.errors, overSse.errors]) {
        expect(errors[0]).toMatchObject({ extensions: { code: "FORBIDDEN", requiredScope: "webhooks:read" } });
      }
    } finally {
      await overWs.dispose();
      overSse.dispose();
    }
  });

  it("records a key's use at most once a minute, visible on every instance", async () => {
    const used = await createKey(["references:read"]);
    expectStatus(await http({ url: second.url, apiKey: used.key }, "GET", "/v1/tags"), 200);
    await eventually(async () => (await http(first, "GET", `/v1/api-keys/${used.id}`)).body.last_used_at !== null);
    const { last_used_at: firstUse } = (await http(first, "GET", `/v1/api-keys/${used.id}`)).body;
    for (let request = 0; request < 5; request++)
      expectStatus(await http({ url: first.url, apiKey: used.key }, "GET", "/v1/tags"), 200);
    // Within the minute, later requests on either instance write nothing.
    expect((await http(second, "GET", `/v1/api-keys/${used.id}`)).body.last_used_at).toBe(firstUse);
  });
});
