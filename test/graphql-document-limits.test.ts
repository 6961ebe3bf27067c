import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gql, gqlData } from "./support/graphql-client.ts";
import { http } from "./support/http.ts";
import { subscribe } from "./support/subscription-client.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * A small document whose fragments expand exponentially: fragment i spreads fragment i + 1 twice, so 30 of them
 * (about 1 KB) stand for 3 * 2^30 - 1 selections (fields and spreads). Every transport refuses it at once with the
 * selection limit's error, and the server keeps answering other requests meanwhile. No duration is asserted: the per-test timeout
 * below is what fails when a check expands the fragments (30 fragments took minutes on the event loop).
 */

/** `{ ...F0 } fragment F0 on Query { ...F1 ...F1 } … fragment F<n> on Query { __typename }` */
function doublingFragments(count: number): string {
  const fragments = Array.from({ length: count }, (_, i) => `fragment F${i} on Query { ...F${i + 1} ...F${i + 1} }`);
  return `{ ...F0 } ${fragments.join(" ")} fragment F${count} on Query { __typename }`;
}

const HOSTILE = doublingFragments(30);

/** Generous for a loaded machine, far below what expanding 2^30 selections takes. */
const TEST_TIMEOUT_MS = 20_000;

const REFUSAL = {
  code: "GRAPHQL_VALIDATION_FAILED",
  limit: { kind: "selections", maximum: 10_000, actual: 3 * 2 ** 30 - 1 },
};

describe.each(DATABASE_KINDS)("GraphQL document limits on %s", (kind) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer(kind);
  }, 60_000);

  afterAll(async () => {
    await server?.close();
  });

  it(
    "refuses a document whose fragments expand past the limit over POST and GET, while /healthz and queries answer",
    async () => {
      expect(HOSTILE.length).toBeLessThan(1_300);
      const get = () =>
        http(server, "GET", `/graphql?query=${encodeURIComponent(HOSTILE)}`, {
          headers: { accept: "application/json" },
        });
      const [post, viaGet, health, query] = await Promise.all([
        gql(server, HOSTILE),
        get(),
        http(server, "GET", "/healthz", { apiKey: null }),
        gqlData(server, `{ tags(first: 1) { edges { node { id } } } }`),
      ]);
      expect(post.status).toBe(400);
      expect(post.body.data ?? null).toBeNull();
      expect(post.body.errors?.[0]).toMatchObject({
        message:
          "The operation makes 3221225471 selections once its fragments are expanded; the maximum is 10000. Spread fewer fragments, or split the operation.",
        extensions: REFUSAL,
      });
      expect(viaGet.status).toBe(400);
      expect(viaGet.body.errors?.[0]?.extensions).toMatchObject(REFUSAL);
      expect(health).toMatchObject({ status: 200, body: { status: "ok" } });
      expect(query.tags.edges).toEqual([]);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    "refuses the same document over graphql-ws, and the connection's server keeps answering",
    async () => {
      const subscription = subscribe(server, HOSTILE);
      const [, health] = await Promise.all([subscription.ended, http(server, "GET", "/healthz", { apiKey: null })]);
      expect(subscription.errors[0]?.extensions).toMatchObject(REFUSAL);
      expect(subscription.data).toEqual([]);
      expect(health.status).toBe(200);
    },
    TEST_TIMEOUT_MS,
  );

  it("accepts a document whose fragments expand to no more than the limit", async () => {
    // 3 * 2^11 - 1 = 6143 selections (2048 of them __typename, merged into one field when executed).
    const { status, body } = await gql(server, doublingFragments(11));
    expect(status).toBe(200);
    expect(body).toMatchObject({ data: { __typename: "Query" } });
  });
});
