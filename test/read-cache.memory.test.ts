import { API_KEY_SCOPES } from "../src/domain/organizations/api-key-scopes.ts";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Registry } from "prom-client";
import { buildServices } from "../src/build-services.ts";
import { loadConfig } from "../src/config.ts";
import { openDatabase } from "../src/store/database.ts";
import { ReadCache } from "../src/pipeline/read-cache/read-cache.ts";
import { expectStatus, http } from "./support/http.ts";
import { startServerProcess, type ServerProcess } from "./support/server-process.ts";
import { createTestDatabase, TEST_WEBHOOK_SECRET_KEY, type TestDatabase } from "./support/test-server.ts";

/*
 * The read cache's memory is bounded by what it counts, and it counts what it holds: a response's bytes and its
 * key's, the key holding a digest of the request rather than the request. Large unique requests (a GraphQL query
 * with hundreds of kilobytes of variables) cost a few dozen bytes each.
 */

/** The gauge `reftrail_read_cache_bytes` of a registry or of /metrics text. */
function cacheBytes(metricsText: string): number {
  const match = /^reftrail_read_cache_bytes (\d+)$/m.exec(metricsText);
  if (!match) throw new Error("reftrail_read_cache_bytes missing from the metrics");
  return Number(match[1]);
}

describe("the read cache's key", () => {
  it("is a digest of the request, and its bytes are counted with the response's", async () => {
    const registry = new Registry();
    const cache = new ReadCache({ maxBytes: 10_000_000, registry });
    const caller = {
      organizationId: "org",
      apiKeyId: "key",
      apiKeyPrefix: "rt_abcde",
      scopes: new Set(API_KEY_SCOPES),
      trustedDocumentsOnly: false,
      readVersion: "1/none",
    };
    const request = `graphql ${"x".repeat(500_000)}`;
    const key = cache.keyOf(caller, request);
    expect(key.length).toBeLessThan(100);
    expect(cache.keyOf(caller, request)).toBe(key);
    expect(cache.keyOf(caller, `${request}y`)).not.toBe(key);
    expect(cache.keyOf({ ...caller, readVersion: "2/none" }, request)).not.toBe(key);
    expect(cache.keyOf({ ...caller, scopes: new Set(["references:read"] as const) }, request)).not.toBe(key);

    cache.keep(key, '{"data":{}}', "application/json");
    expect(cacheBytes(await registry.metrics())).toBe(Buffer.byteLength('{"data":{}}') + Buffer.byteLength(key));
    expect(cache.find(key)?.body.toString()).toBe('{"data":{}}');
  });

  it("keeps the total of responses and keys under the bound", async () => {
    const registry = new Registry();
    const cache = new ReadCache({ maxBytes: 1_000, registry });
    const caller = {
      organizationId: "org",
      apiKeyId: "key",
      apiKeyPrefix: "rt_abcde",
      scopes: new Set(API_KEY_SCOPES),
      trustedDocumentsOnly: false,
      readVersion: "1/none",
    };
    for (let index = 0; index < 100; index++) cache.keep(cache.keyOf(caller, `request ${index}`), "{}", "x");
    const bytes = cacheBytes(await registry.metrics());
    expect(bytes).toBeLessThanOrEqual(1_000);
    // Each entry counts more than its 2-byte body (100 bodies are 200 bytes): the keys fill the bound.
    expect(bytes).toBeGreaterThan(500);
  });
});

/*
 * A real server process, measured from outside: its resident memory (prom-client's process metric) before and
 * after 300 GraphQL reads, each with unique ~500 KB variables. SQLite only: the cache sits above the database,
 * and the requests never read data.
 */
describe("a server answering 300 reads with unique 500 KB variables", () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let apiKey: string;

  beforeAll(async () => {
    database = await createTestDatabase("sqlite");
    const opened = await openDatabase(database.url);
    try {
      const services = buildServices(
        loadConfig({ NODE_ENV: "test", DATABASE_URL: database.url, WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY }),
        opened,
      );
      apiKey = (await services.organizations.createOrganization("memory")).apiKey.key;
    } finally {
      await opened.close();
    }
    server = await startServerProcess({ DATABASE_URL: database.url });
  }, 60_000);

  afterAll(async () => {
    if (server && server.child.exitCode === null) {
      server.child.kill("SIGTERM");
      await server.exited();
    }
    await database?.drop();
  });

  async function metrics(): Promise<string> {
    const response = await http({ url: server.url, apiKey: "" }, "GET", "/metrics", { apiKey: null });
    expectStatus(response, 200);
    return String(response.body);
  }

  async function residentBytes(): Promise<number> {
    const match = /^process_resident_memory_bytes (\d+)$/m.exec(await metrics());
    if (!match) throw new Error("process_resident_memory_bytes missing from /metrics");
    return Number(match[1]);
  }

  async function read(index: number): Promise<void> {
    // 500 KB of variables the operation does not use: part of the request as sent, so part of what is cached.
    const padding = `${String(index).padStart(8, "0")}${"v".repeat(500_000)}`;
    const response = await http({ url: server.url, apiKey }, "POST", "/graphql", {
      body: { query: "{ __typename }", variables: { padding } },
    });
    expectStatus(response, 200);
    expect(response.body).toMatchObject({ data: { __typename: "Query" } });
  }

  it("grows its resident memory by less than 100 MB, and the cache counts every entry's key", async () => {
    // A warm-up, so that what is measured is the cache, not the first requests' allocations (buffers, code) nor
    // the heap growing to the working size of 500 KB requests (their strings are collected by full collections).
    for (let index = 0; index < 100; index++) await read(index);
    const bytesBefore = cacheBytes(await metrics());
    const before = await residentBytes();
    for (let index = 100; index < 400; index++) await read(index);
    const after = await residentBytes();
    const bytesAfter = cacheBytes(await metrics());

    // 300 responses were kept, each counted with its key (a digest), not with its 500 KB request.
    expect(bytesAfter - bytesBefore).toBeGreaterThan(300 * 30);
    expect(bytesAfter - bytesBefore).toBeLessThan(300 * 200);
    expect(after - before).toBeLessThan(100 * 1024 * 1024);
    expect(server.child.exitCode).toBeNull();
  }, 120_000);
});
