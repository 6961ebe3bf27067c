import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createClient, type FormattedExecutionResult } from "graphql-ws";
import WebSocket from "ws";
import { gql } from "./support/graphql-client.ts";
import { http } from "./support/http.ts";
import { sseUrl } from "./support/sse-client.ts";
import { graphqlWsUrl, metricValue } from "./support/subscription-client.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * One request pipeline for every transport (src/pipeline/graphql-pipeline.ts): an operation over graphql-ws or
 * SSE is prepared, charged and published like the same operation over HTTP. A key whose budget holds less than
 * an operation costs is refused THROTTLED on every transport, and what it asked for does not run.
 */

/** Estimate 7 (`tags` 1 + 3 × `pageInfo` 2); actual 3 (`tags`, `pageInfo`, `hasNextPage`), whatever the data. */
const PAGE_INFO_QUERY = `query PageInfo { tags(first: 3) { pageInfo { hasNextPage } } }`;
/** Restores so slowly that a test's own duration changes nothing. */
const SLOW = 0.001;

interface Cost {
  requestedQueryCost: number;
  actualQueryCost: number;
  throttleStatus: { maximumAvailable: number; currentlyAvailable: number; restoreRate: number };
}

async function keyWithBudget(server: TestServer, maximum: number) {
  const issued = await server.app.services.organizations.createApiKey(server.organizationId, {
    budget: { maximum, restoreRate: SLOW },
  });
  return { url: server.url, apiKey: issued.key };
}

/** Runs one operation over graphql-ws; its one result, or the errors of its `error` message. */
async function overWebSocket(
  server: Pick<TestServer, "url">,
  apiKey: string,
  query: string,
): Promise<{ result?: FormattedExecutionResult<Record<string, unknown>, { cost?: Cost }>; errors?: unknown[] }> {
  const client = createClient({
    url: graphqlWsUrl(server),
    webSocketImpl: WebSocket,
    connectionParams: { "x-api-key": apiKey },
    retryAttempts: 0,
  });
  try {
    return await new Promise((resolve, reject) => {
      let result: FormattedExecutionResult<Record<string, unknown>, { cost?: Cost }> | undefined;
      client.subscribe<Record<string, unknown>, { cost?: Cost }>(
        { query },
        {
          next: (message) => (result = message),
          error: (error) => (Array.isArray(error) ? resolve({ errors: error }) : reject(error as Error)),
          complete: () => resolve({ result }),
        },
      );
    });
  } finally {
    await client.dispose();
  }
}

/** POSTs a GraphQL request body as given (the shared client sends only query and variables). */
async function postGraphql(key: { url: string; apiKey: string }, body: Record<string, unknown>) {
  const response = await fetch(`${key.url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": key.apiKey },
    body: JSON.stringify(body),
  });
  return {
    status: response.status,
    body: (await response.json()) as { data?: unknown; errors?: { extensions?: { code?: string } }[] },
  };
}

describe.each(DATABASE_KINDS)("one pipeline for every transport (%s)", (kind) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer(kind, { env: { WEBHOOK_WORKER: "off" } });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("charges and publishes a query over graphql-ws as over HTTP, from the same bucket", async () => {
    const key = await keyWithBudget(server, 100);
    const overHttp = await gql(key, PAGE_INFO_QUERY, {}, { headers: { "cache-control": "no-cache" } });
    expect((overHttp.body.extensions as { cost: Cost }).cost).toEqual({
      requestedQueryCost: 7,
      actualQueryCost: 3,
      throttleStatus: { maximumAvailable: 100, currentlyAvailable: 97, restoreRate: SLOW },
    });
    const { result } = await overWebSocket(server, key.apiKey, PAGE_INFO_QUERY);
    expect(result?.errors).toBeUndefined();
    expect(result?.extensions?.cost).toEqual({
      requestedQueryCost: 7,
      actualQueryCost: 3,
      throttleStatus: { maximumAvailable: 100, currentlyAvailable: 94, restoreRate: SLOW },
    });
  });

  it("refuses an operation over graphql-ws with THROTTLED when the key's budget holds less, and runs nothing", async () => {
    const key = await keyWithBudget(server, 10);
    const spent = await overWebSocket(server, key.apiKey, PAGE_INFO_QUERY);
    expect(spent.result?.extensions?.cost?.throttleStatus.currentlyAvailable).toBe(7);
    await overWebSocket(server, key.apiKey, PAGE_INFO_QUERY);
    const name = `pipeline-${kind}-refused`;
    // The mutation's estimate is over what the bucket holds (4 after two queries that used 3 each).
    const mutation = `mutation { a: createTag(input: { name: "${name}" }) { tag { id name createdAt updatedAt } } }`;
    const refused = await overWebSocket(server, key.apiKey, mutation);
    expect(refused.result).toBeUndefined();
    expect(refused.errors).toEqual([
      expect.objectContaining({
        message: expect.stringContaining("the API key's budget holds 4 of 10"),
        extensions: expect.objectContaining({ code: "THROTTLED", retryAfterSeconds: expect.any(Number) }),
      }),
    ]);
    // Nothing was written.
    const tags = await http(server, "GET", `/v1/tags?limit=100`);
    expect((tags.body.data as { name: string }[]).some((tag) => tag.name === name)).toBe(false);
  });

  it("refuses a subscription over SSE with 429 THROTTLED and Retry-After when the key's budget holds less", async () => {
    const key = await keyWithBudget(server, 10);
    // 4 left after two queries that used 3 each; the subscription's estimate is 5.
    await overWebSocket(server, key.apiKey, PAGE_INFO_QUERY);
    await overWebSocket(server, key.apiKey, PAGE_INFO_QUERY);
    const response = await fetch(sseUrl(server), {
      method: "POST",
      headers: { "x-api-key": key.apiKey, "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({ query: "subscription { lifecycleEvents { cursor node { id type } } }" }),
    });
    expect(response.status).toBe(429);
    expect(Number(response.headers.get("retry-after"))).toBeGreaterThan(0);
    const body = (await response.json()) as { errors: { extensions: { code: string } }[] };
    expect(body.errors[0]?.extensions.code).toBe("THROTTLED");
  });

  it("prepares a document once, whichever transport sends it again", async () => {
    const query = `query Once { tags(first: 2) { edges { node { id } } } }`;
    const before = await metricValue(server, 'reftrail_prepared_document_lookups_total{result="hit"}');
    await overWebSocket(server, server.apiKey, query);
    await overWebSocket(server, server.apiKey, query);
    await overWebSocket(server, server.apiKey, query);
    const after = await metricValue(server, 'reftrail_prepared_document_lookups_total{result="hit"}');
    expect(after - before).toBeGreaterThanOrEqual(2);
  });

  it("keeps automatic persisted queries per organization: another one's hash is not found", async () => {
    const query = `query Apq${kind} { tags(first: 1) { edges { node { id } } } }`;
    const persistedQuery = { version: 1, sha256Hash: createHash("sha256").update(query).digest("hex") };
    const other = await server.app.services.organizations.createOrganization(`apq-other-${kind}`);
    const otherKey = { url: server.url, apiKey: other.apiKey.key };
    const sent = await postGraphql(server, { query, extensions: { persistedQuery } });
    expect(sent.body.errors).toBeUndefined();
    const byHash = await postGraphql(server, { extensions: { persistedQuery } });
    expect(byHash.body.errors).toBeUndefined();
    expect(byHash.body.data).toEqual(sent.body.data);
    const elsewhere = await postGraphql(otherKey, { extensions: { persistedQuery } });
    expect(elsewhere.status).toBe(200);
    expect(elsewhere.body.errors?.[0]?.extensions?.code).toBe("PERSISTED_QUERY_NOT_FOUND");
  });
});
