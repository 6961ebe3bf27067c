import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gqlData } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * `name_prefix` (REST) and `filter.namePrefix` (GraphQL) match the text literally: `%` and `_`, wildcards of SQL's
 * LIKE, and `!`, the escape character the store uses, are ordinary characters in a prefix, on both databases.
 */

const TAG_NAMES = ["100%", "1000", "100x", "a_b", "axb", "a!b", "a!!b", "a%b", "abc"];

const TAGS_QUERY = `query ($prefix: String) {
  tags(first: 100, filter: { namePrefix: $prefix }) { edges { node { name } } }
}`;

describe.each(DATABASE_KINDS)("tag name prefixes on %s", (kind) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer(kind);
    for (const name of TAG_NAMES) expectStatus(await http(server, "POST", "/v1/tags", { body: { name } }), 201);
  }, 60_000);
  afterAll(async () => {
    await server?.close();
  });

  const cases: [string, string[]][] = [
    ["%", []],
    ["_", []],
    ["100%", ["100%"]],
    ["100", ["100%", "1000", "100x"]],
    ["a_", ["a_b"]],
    ["a%", ["a%b"]],
    ["a!", ["a!!b", "a!b"]],
    ["a!!", ["a!!b"]],
    ["a", ["a!!b", "a!b", "a%b", "a_b", "abc", "axb"]],
  ];

  it.each(cases)("REST name_prefix=%s lists exactly the tags whose names start with it", async (prefix, expected) => {
    const listed = await http(server, "GET", `/v1/tags?limit=100&name_prefix=${encodeURIComponent(prefix)}`);
    expectStatus(listed, 200);
    const names = listed.body.data.map((tag: { name: string }) => tag.name).sort();
    expect(names).toEqual([...expected].sort());
  });

  it.each(cases)("GraphQL namePrefix %s lists exactly the tags whose names start with it", async (prefix, expected) => {
    const data = await gqlData(server, TAGS_QUERY, { prefix });
    const names = data.tags.edges.map((edge: { node: { name: string } }) => edge.node.name).sort();
    expect(names).toEqual([...expected].sort());
  });
});
