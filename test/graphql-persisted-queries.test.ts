import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { buildServices } from "../src/build-services.ts";
import { loadConfig } from "../src/config.ts";
import { openDatabase } from "../src/store/database.ts";
import { expectEventually } from "./support/expect-eventually.ts";
import { startServerProcess, type ServerProcess } from "./support/server-process.ts";
import { createTestDatabase, TEST_WEBHOOK_SECRET_KEY, type TestDatabase } from "./support/test-server.ts";

/*
 * Automatic persisted queries (Apollo's protocol: `extensions.persistedQuery { version: 1, sha256Hash }`). A
 * client's mistake in it — a hash that does not match the query sent with it, a version other than 1 — is a
 * 400 with Apollo's code BAD_REQUEST and a message that says what is wrong, and the server logs no error: it
 * is not the server's fault. An unknown hash sent without its query is Apollo's PERSISTED_QUERY_NOT_FOUND, the
 * answer that tells a client to send the query along. The server runs as its own process so that its log is
 * read as an operator reads it. The protocol touches no database: SQLite is enough.
 */

const QUERY = "{ __typename }";
const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

describe("automatic persisted queries", () => {
  let database: TestDatabase;
  let server: ServerProcess | undefined;
  let apiKey: string;
  let requests = 0;

  beforeAll(async () => {
    database = await createTestDatabase("sqlite");
    const opened = await openDatabase(database.url);
    try {
      const services = buildServices(
        loadConfig({ NODE_ENV: "test", DATABASE_URL: database.url, WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY }),
        opened,
      );
      apiKey = (await services.organizations.createOrganization("apq")).apiKey.key;
    } finally {
      await opened.close();
    }
    server = await startServerProcess({ DATABASE_URL: database.url, LOG_FORMAT: "json", LOG_LEVEL: "info" });
  }, 60_000);
  afterAll(async () => {
    if (server && server.child.exitCode === null) {
      server.child.kill("SIGTERM");
      await server.exited();
    }
    await database?.drop();
  });

  async function post(body: unknown): Promise<{ status: number; body: any }> {
    requests++;
    const response = await fetch(`${server!.url}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": apiKey },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: await response.json() };
  }

  /** The server's JSON log records so far. */
  function logRecords(): Record<string, any>[] {
    return server!
      .output()
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as Record<string, any>);
  }

  /**
   * The records logged since `mark` (a count of records), once every request sent so far has been logged as
   * completed: Fastify logs a request's completion after anything the request itself logged.
   */
  async function recordsSince(mark: number): Promise<Record<string, any>[]> {
    await expectEventually(logRecords, (records) =>
      expect(records.filter((record) => record.msg === "request completed")).toHaveLength(requests),
    );
    return logRecords().slice(mark);
  }

  it("answers a client's mistakes with 400 BAD_REQUEST and a clear message, and logs no error", async () => {
    const mark = (await recordsSince(0)).length;
    const mismatch = await post({
      query: QUERY,
      extensions: { persistedQuery: { version: 1, sha256Hash: sha256("{ other }") } },
    });
    expect(mismatch.status).toBe(400);
    expect(mismatch.body.errors).toEqual([
      { message: "provided sha does not match query", extensions: { code: "BAD_REQUEST" } },
    ]);

    const version = await post({
      query: QUERY,
      extensions: { persistedQuery: { version: 2, sha256Hash: sha256(QUERY) } },
    });
    expect(version.status).toBe(400);
    expect(version.body.errors).toHaveLength(1);
    expect(version.body.errors[0].extensions).toEqual({ code: "BAD_REQUEST" });
    expect(version.body.errors[0].message).toMatch(/persisted query version.*\b1\b/i);

    expect((await recordsSince(mark)).filter((record) => record.level >= 50)).toEqual([]);
  });

  it("asks for the query when it does not know the hash, then answers by the hash alone", async () => {
    const mark = (await recordsSince(0)).length;
    const known = sha256(QUERY);
    const unknown = await post({ extensions: { persistedQuery: { version: 1, sha256Hash: known } } });
    expect(unknown.status).toBe(200);
    expect(unknown.body.errors?.[0]?.extensions?.code).toBe("PERSISTED_QUERY_NOT_FOUND");

    const registered = await post({ query: QUERY, extensions: { persistedQuery: { version: 1, sha256Hash: known } } });
    expect(registered).toMatchObject({ status: 200, body: { data: { __typename: "Query" } } });
    const byHash = await post({ extensions: { persistedQuery: { version: 1, sha256Hash: known } } });
    expect(byHash).toMatchObject({ status: 200, body: { data: { __typename: "Query" } } });

    expect((await recordsSince(mark)).filter((record) => record.level >= 50)).toEqual([]);
  });
});
