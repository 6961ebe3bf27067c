import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Read admission and the read cache tell a GraphQL query from a mutation by the operation the request runs, as
 * parsed from its document and selected by its operation name, never by the document's text: the word
 * `mutation` in a comment or a string does not make a query a write, a comment before `mutation` does not make a
 * mutation a read, and a persisted query sent as its hash alone is what its stored document is. Seen from
 * /metrics (open outside production): `reftrail_reads_admitted_total` counts the reads admission let run, and
 * `reftrail_read_cache_lookups_total` the reads the cache looked up.
 */

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

describe.each(DATABASE_KINDS)("a GraphQL request's kind on %s", (kind) => {
  let server: TestServer;
  let names = 0;

  beforeAll(async () => {
    server = await startTestServer(kind, { env: { WEBHOOK_WORKER: "off" } });
  });
  afterAll(async () => {
    await server?.close();
  });

  async function metric(pattern: RegExp): Promise<number> {
    const text = String((await http(server, "GET", "/metrics", { apiKey: null })).body);
    return [...text.matchAll(pattern)].reduce((sum, match) => sum + Number(match[1]), 0);
  }
  const admitted = () => metric(/^reftrail_reads_admitted_total (\d+)$/gm);
  const hits = () => metric(/^reftrail_read_cache_lookups_total\{result="hit"\} (\d+)$/gm);
  const lookups = () => metric(/^reftrail_read_cache_lookups_total\{result="\w+"\} (\d+)$/gm);

  async function post(body: Record<string, unknown>): Promise<{ status: number; body: any }> {
    const response = await fetch(`${server.url}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": server.apiKey },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: await response.json() };
  }

  /** How many reads admission let run, and how many lookups the cache made, for `request`. */
  async function counted(request: () => Promise<unknown>): Promise<{ admitted: number; lookups: number }> {
    const [admittedBefore, lookupsBefore] = [await admitted(), await lookups()];
    await request();
    return { admitted: (await admitted()) - admittedBefore, lookups: (await lookups()) - lookupsBefore };
  }

  it.each([
    ["in a comment", `# not a mutation\n{ tags(first: 5) { edges { node { name } } } }`, undefined],
    ["in a string", `{ tags(first: 5, filter: { namePrefix: "mutation" }) { edges { node { name } } } }`, undefined],
    [
      "as the document's other operation",
      `mutation Write { createTag(input: { name: "never-run" }) { tag { id } } }\nquery Read { tags(first: 5) { edges { node { name } } } }`,
      "Read",
    ],
  ])("admits a query with the word `mutation` %s as a read, and caches it", async (_label, query, operationName) => {
    const first = await counted(async () => expect((await post({ query, operationName })).status).toBe(200));
    expect(first).toEqual({ admitted: 1, lookups: 1 });
    const hitsBefore = await hits();
    const second = await post({ query, operationName });
    expect(second.status).toBe(200);
    expect(second.body.errors).toBeUndefined();
    expect((await hits()) - hitsBefore).toBe(1);
  });

  it.each([
    ["plain", `mutation ($name: String!) { createTag(input: { name: $name }) { tag { id } } }`, undefined],
    [
      "after a comment",
      `# writes a tag\nmutation ($name: String!) { createTag(input: { name: $name }) { tag { id } } }`,
      undefined,
    ],
    [
      "selected beside a query",
      `query Read { tags(first: 5) { edges { node { name } } } }\nmutation Write($name: String!) { createTag(input: { name: $name }) { tag { id } } }`,
      "Write",
    ],
  ])("never holds nor caches a mutation (%s)", async (_label, query, operationName) => {
    for (let round = 0; round < 2; round++) {
      const sent = await counted(async () => {
        const answer = await post({ query, operationName, variables: { name: `tag-${++names}` } });
        expect(answer.status).toBe(200);
        expect(answer.body.data.createTag.tag.id).toEqual(expect.any(String));
      });
      expect(sent).toEqual({ admitted: 0, lookups: 0 });
    }
  });

  it("classifies a persisted query sent as its hash alone by its stored document", async () => {
    const read = `{ tags(first: 2) { edges { node { name } } } }`;
    const write = `mutation ($name: String!) { createTag(input: { name: $name }) { tag { name } } }`;
    const persisted = (query: string, variables: Record<string, unknown>, withText: boolean) =>
      post({
        ...(withText && { query }),
        variables,
        extensions: { persistedQuery: { version: 1, sha256Hash: sha256(query) } },
      });
    // Registered (the text with its hash), then sent as the hash alone.
    for (const query of [read, write]) {
      expect((await persisted(query, { name: `tag-${++names}` }, true)).body.errors).toBeUndefined();
    }

    const asRead = await counted(async () => {
      const answer = await persisted(read, {}, false);
      expect(answer.body.data.tags.edges.length).toBeGreaterThan(0);
    });
    expect(asRead.admitted).toBe(1);
    const asWrite = await counted(async () => {
      const answer = await persisted(write, { name: `tag-${++names}` }, false);
      expect(answer.body.data.createTag.tag.name).toBe(`tag-${names}`);
    });
    expect(asWrite.admitted).toBe(0);
  });
});
