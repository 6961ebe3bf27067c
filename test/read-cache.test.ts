import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import Sqlite from "better-sqlite3";
import pg from "pg";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { sqliteFilePath } from "../src/store/database.ts";
import { gql, gqlData } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import {
  DATABASE_KINDS,
  ManualClock,
  startInstanceOn,
  startTestServer,
  type TestServer,
} from "./support/test-server.ts";

/*
 * The read cache (src/read-cache/) answers a repeated read without reading the data again, and never answers
 * what computing it afresh would not: every commit that changes an organization's tags, references or log
 * raises its data version in the database, whoever makes it (this instance, another one, plain SQL).
 * A hit shows as a request that sent one statement: the API key lookup, which reads the version.
 */

let serial = 0;
function containerNumber(): string {
  const firstTen = `MSCU${String(++serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

const REFERENCE_QUERY = `query Reference($id: ID!) {
  reference(id: $id) { id tags { name } events(first: 50) { edges { node { type } } } }
}`;

describe.each(DATABASE_KINDS)("the read cache on %s", (kind) => {
  let server: TestServer;
  let otherInstance: TestServer;
  let counting = false;
  let statements: string[] = [];

  /** Runs `request` and returns its result and the number of SQL statements this instance sent for it. */
  async function measure<T>(request: () => Promise<T>): Promise<{ result: T; statements: number }> {
    statements = [];
    counting = true;
    try {
      const result = await request();
      return { result, statements: statements.length };
    } finally {
      counting = false;
    }
  }

  async function createReference(tags: string[]): Promise<string> {
    const created = await http(server, "POST", "/v1/references", {
      body: { container_id: containerNumber(), carrier_code: "MSCU", tags: tags.map((name) => ({ name })) },
    });
    expectStatus(created, 201);
    return created.body.reference.id as string;
  }

  beforeAll(async () => {
    // No webhook worker: its statements would land in the counts at random. The cost budget's charges
    // (PostgreSQL: one statement per event-loop turn, src/store/sql/budget-ledger.ts) read no data: not counted.
    server = await startTestServer(kind, {
      onQuery: (sql) => {
        if (counting && !sql.includes('"api_key_budgets"')) statements.push(sql);
      },
      env: { WEBHOOK_WORKER: "off" },
    });
    otherInstance = await startInstanceOn(server, { env: { WEBHOOK_WORKER: "off" } });
  });

  afterAll(async () => {
    await otherInstance?.close();
    await server?.close();
  });

  it("answers a repeated REST or GraphQL read with the same body after the key lookup alone", async () => {
    const referenceId = await createReference(["cached"]);
    for (const path of ["/v1/references?limit=50", `/v1/references/${referenceId}/events?limit=50`, "/v1/tags"]) {
      const first = await measure(() => http(server, "GET", path));
      expectStatus(first.result, 200);
      expect(first.statements).toBeGreaterThan(1);
      const second = await measure(() => http(server, "GET", path));
      expectStatus(second.result, 200);
      expect(second.statements).toBe(1);
      expect(second.result.body).toEqual(first.result.body);
      expect(second.result.headers.get("content-type")).toBe(first.result.headers.get("content-type"));
    }
    const first = await measure(() => gql(server, REFERENCE_QUERY, { id: referenceId }));
    expect(first.statements).toBeGreaterThan(1);
    const second = await measure(() => gql(server, REFERENCE_QUERY, { id: referenceId }));
    expect(second.statements).toBe(1);
    expect(second.result.body).toEqual(first.result.body);
    expect(second.result.body.data.reference.tags).toEqual([{ name: "cached" }]);

    // Operators see it in /metrics (open outside production).
    const metrics = await http(server, "GET", "/metrics", { apiKey: null });
    const hits = /^reftrail_read_cache_lookups_total\{result="hit"\} (\d+)$/m.exec(String(metrics.body));
    expect(Number(hits?.[1])).toBeGreaterThanOrEqual(4);
    const bytes = /^reftrail_read_cache_bytes (\d+)$/m.exec(String(metrics.body));
    expect(Number(bytes?.[1])).toBeGreaterThan(0);

    // Only reads are looked up: a mutation counts neither as a hit nor as a miss.
    const lookups = async () => {
      const text = String((await http(server, "GET", "/metrics", { apiKey: null })).body);
      return [...text.matchAll(/^reftrail_read_cache_lookups_total\{result="\w+"\} (\d+)$/gm)].reduce(
        (sum, match) => sum + Number(match[1]),
        0,
      );
    };
    const before = await lookups();
    const created = await gql(
      server,
      `mutation ($name: String!) { createTag(input: { name: $name }) { tag { id } } }`,
      {
        name: "not-a-read",
      },
    );
    expect(created.body.errors).toBeUndefined();
    expect(await lookups()).toBe(before);
  });

  it("sends a GraphQL hit as first sent, per method and Accept header, and never to a key that fails", async () => {
    await createReference(["headers"]);
    const query = `{ tags(first: 5) { edges { node { name } } } }`;
    const first = await gql(server, query);
    const second = await measure(() => gql(server, query));
    expect(second.statements).toBe(1);
    expect(second.result.body).toEqual(first.body);
    for (const header of ["content-type", "cache-control"]) {
      expect(second.result.headers.get(header)).toBe(first.headers.get(header));
    }
    expect(second.result.headers.get("cache-control")).toBe("no-store");

    const plainJson = async () =>
      fetch(`${server.url}/graphql?query=${encodeURIComponent(query)}`, {
        headers: { accept: "application/json", "x-api-key": server.apiKey },
      });
    const firstGet = await plainJson();
    expect(firstGet.headers.get("content-type")).toMatch(/^application\/json/);
    const secondGet = await measure(plainJson);
    expect(secondGet.statements).toBe(1);
    expect(secondGet.result.headers.get("content-type")).toBe(firstGet.headers.get("content-type"));
    expect(await secondGet.result.json()).toEqual(await firstGet.json());

    const denied = await gql(server, query, {}, { apiKey: "rt_not-a-key" });
    expect(denied.status).toBe(401);
    expect(denied.body.errors?.[0]?.extensions?.code).toBe("UNAUTHENTICATED");
  });

  it("never answers a malformed operation name from the entry of the same query without one", async () => {
    const post = (body: object) =>
      fetch(`${server.url}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": server.apiKey },
        body: JSON.stringify(body),
      });
    const query = "{ __typename }";
    for (let round = 0; round < 2; round++) expect((await post({ query })).status).toBe(200);
    for (const operationName of [{ obj: "ect" }, 0, false, ["array"]]) {
      const refused = await post({ query, operationName });
      expect(refused.status).toBe(400);
      expect(
        ((await refused.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code,
      ).toBe("BAD_REQUEST");
    }
  });

  it("shows every write made through the API to the next read, REST and GraphQL alike", async () => {
    const referenceId = await createReference(["before"]);
    // Both reads cached, then changed by a tag, an event and a rename.
    const before = await gqlData(server, REFERENCE_QUERY, { id: referenceId });
    expect(before.reference.events.edges.length).toBe(1);
    await http(server, "GET", `/v1/references/${referenceId}`);
    expectStatus(
      await http(server, "POST", `/v1/references/${referenceId}/tags`, { body: { tags: [{ name: "after" }] } }),
      200,
    );
    expectStatus(
      await http(server, "POST", `/v1/references/${referenceId}/extractions`, { body: { status: "succeeded" } }),
      201,
    );
    const data = await gqlData(server, REFERENCE_QUERY, { id: referenceId });
    expect(data.reference.tags.map((tag: { name: string }) => tag.name)).toEqual(["after", "before"]);
    expect(data.reference.events.edges.length).toBe(2);
    const rest = await http(server, "GET", `/v1/references/${referenceId}`);
    expect(rest.body.tags.map((tag: { name: string }) => tag.name)).toEqual(["after", "before"]);

    const tagId = rest.body.tags.find((tag: { name: string }) => tag.name === "after").id;
    await gqlData(server, `mutation($id: ID!) { renameTag(input: { id: $id, name: "renamed" }) { tag { name } } }`, {
      id: tagId,
    });
    const renamed = await http(server, "GET", `/v1/references/${referenceId}`);
    expect(renamed.body.tags.map((tag: { name: string }) => tag.name)).toEqual(["before", "renamed"]);
  });

  it("shows at once what another instance wrote", async () => {
    const referenceId = await createReference([]);
    const path = `/v1/references/${referenceId}/events?limit=50`;
    expect((await http(server, "GET", path)).body.data).toHaveLength(1);
    expectStatus(
      await http(otherInstance, "POST", `/v1/references/${referenceId}/extractions`, {
        body: { status: "succeeded" },
      }),
      201,
    );
    expect((await http(server, "GET", path)).body.data).toHaveLength(2);
  });

  it("shows every one of many parallel writes, from two instances, to the cached reads of both", async () => {
    // On PostgreSQL the version is raised at COMMIT under the commit-numbering lock: concurrent writers of one
    // organization must each raise it (no lost update), and none may deadlock with the numbering.
    const references = await Promise.all(Array.from({ length: 5 }, () => createReference([])));
    const pages = references.map((id) => `/v1/references/${id}/events?limit=50`);
    for (const instance of [server, otherInstance]) {
      for (const page of pages) expect((await http(instance, "GET", page)).body.data).toHaveLength(1);
    }
    const writes = references.flatMap((id, index) =>
      [0, 1, 2, 3].map((round) =>
        http((index + round) % 2 === 0 ? server : otherInstance, "POST", `/v1/references/${id}/extractions`, {
          body: { status: "succeeded" },
        }),
      ),
    );
    for (const written of await Promise.all(writes)) expectStatus(written, 201);
    for (const instance of [server, otherInstance]) {
      for (const page of pages) expect((await http(instance, "GET", page)).body.data).toHaveLength(5);
    }
  });

  it("shows a change written by plain SQL, outside any instance: the version is the database's", async () => {
    const referenceId = await createReference(["outside"]);
    const path = `/v1/references/${referenceId}`;
    expect((await http(server, "GET", path)).body.carrier_code).toBe("MSCU");
    // A column the reference's own row holds: a plain-SQL writer changes it and nothing else.
    const change = `UPDATE "shipping_references" SET "carrier_code" = 'SQLU' WHERE "id" = '${referenceId}'`;
    if (kind === "postgres") {
      const client = new pg.Client({ connectionString: server.database.url });
      await client.connect();
      await client.query(change);
      await client.end();
    } else {
      const connection = new Sqlite(sqliteFilePath(server.database.url));
      connection.exec(change);
      connection.close();
    }
    expect((await http(server, "GET", path)).body.carrier_code).toBe("SQLU");
  });

  it("keeps each organization's responses to itself", async () => {
    await createReference(["mine"]);
    const mine = await http(server, "GET", "/v1/tags?limit=100");
    expect(mine.body.data.length).toBeGreaterThan(0);
    const other = await server.newOrganization("other");
    const theirs = await http({ url: server.url, apiKey: other.apiKey }, "GET", "/v1/tags?limit=100");
    expectStatus(theirs, 200);
    expect(theirs.body.data).toEqual([]);
  });

  it("computes the response afresh for Cache-Control: no-cache, and keeps nothing of it", async () => {
    const noCache = { headers: { "cache-control": "no-cache" } };
    const cachedBytes = async () => {
      const metrics = await http(server, "GET", "/metrics", { apiKey: null });
      return Number(/^reftrail_read_cache_bytes (\d+)$/m.exec(String(metrics.body))?.[1] ?? 0);
    };
    const path = "/v1/references?limit=10";
    const query = `{ references(first: 10) { edges { node { id } } } }`;
    // Cached already: computed afresh all the same.
    await http(server, "GET", path);
    expect((await measure(() => http(server, "GET", path, noCache))).statements).toBeGreaterThan(1);
    await gql(server, query);
    expect((await measure(() => gql(server, query, {}, noCache))).statements).toBeGreaterThan(1);

    // Never read before: answered afresh and not kept. The cache holds no more bytes, and the next plain read
    // computes the response (a miss) and keeps it (the read after it is a hit).
    const unseenPath = "/v1/references?limit=9";
    const unseenQuery = `{ references(first: 9) { edges { node { id } } } }`;
    const reads = [
      { plain: () => http(server, "GET", unseenPath), fresh: () => http(server, "GET", unseenPath, noCache) },
      { plain: () => gql(server, unseenQuery), fresh: () => gql(server, unseenQuery, {}, noCache) },
    ];
    for (const { plain, fresh } of reads) {
      const before = await cachedBytes();
      expect((await measure(fresh)).statements).toBeGreaterThan(1);
      expect(await cachedBytes()).toBe(before);
      expect((await measure(plain)).statements).toBeGreaterThan(1);
      expect((await measure(plain)).statements).toBe(1);
    }
  });

  it("never keeps errors, nor anything about webhooks, which the version does not cover", async () => {
    const missing = "/v1/references/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b";
    for (let round = 0; round < 2; round++) {
      const response = await measure(() => http(server, "GET", missing));
      expectStatus(response.result, 404);
      expect(response.statements).toBeGreaterThan(1);
    }
    const webhooks = `{ webhookEndpoints(first: 10) { edges { node { id } } } }`;
    const referenceId = await createReference([]);
    const node = `query($id: ID!) { node(id: $id) { id } }`;
    for (let round = 0; round < 2; round++) {
      const listed = await measure(() => gql(server, webhooks));
      expect(listed.result.body.errors).toBeUndefined();
      expect(listed.statements).toBeGreaterThan(1);
      const found = await measure(() => gql(server, node, { id: referenceId }));
      expect(found.result.body.data.node.id).toBe(referenceId);
      expect(found.statements).toBeGreaterThan(1);
    }
  });
});

describe.each(DATABASE_KINDS)("the read cache and the retention window on %s", (kind) => {
  it("stops showing an event once it ages out, though its page was cached", async () => {
    const clock = new ManualClock(new Date("2026-01-15T00:00:00.000Z"));
    const server = await startTestServer(kind, {
      clock,
      env: { WEBHOOK_WORKER: "off", RETENTION_MONTHS: "1", RETENTION_PRUNE_INTERVAL: "0" },
    });
    try {
      const created = await http(server, "POST", "/v1/references", {
        body: { container_id: containerNumber(), carrier_code: "MSCU" },
      });
      expectStatus(created, 201);
      const path = `/v1/references/${created.body.reference.id}/events`;
      expect((await http(server, "GET", path)).body.data).toHaveLength(1);
      expect((await http(server, "GET", path)).body.data).toHaveLength(1);
      clock.advance(32 * 24 * 3600 * 1000);
      expect((await http(server, "GET", path)).body.data).toHaveLength(0);
    } finally {
      await server.close();
    }
  });
});

describe.each(DATABASE_KINDS)("the read cache and rate limiting on %s", (kind) => {
  it("counts a cached answer against the key's rate limit like any other", async () => {
    const server = await startTestServer(kind, { env: { WEBHOOK_WORKER: "off", RATE_LIMIT_PER_MINUTE: "4" } });
    try {
      const query = `{ tags(first: 5) { edges { node { name } } } }`;
      expectStatus(await http(server, "GET", "/v1/tags"), 200);
      expectStatus(await http(server, "GET", "/v1/tags"), 200);
      expect((await gql(server, query)).status).toBe(200);
      expect((await gql(server, query)).status).toBe(200);
      expectStatus(await http(server, "GET", "/v1/tags"), 429);
      const limited = await gql(server, query);
      expect(limited.status).toBe(429);
      expect(limited.body.errors?.[0]?.extensions?.code).toBe("RATE_LIMITED");
    } finally {
      await server.close();
    }
  });
});
