import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { gqlData } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { withLabel } from "./support/with-label.ts";

/*
 * Every statement the data layer sends costs far more in the client than in the database, so each hot path
 * has a fixed statement budget, counted here with the test server's statement hook (every SQL statement sent,
 * by the store's driver path or by Prisma, transaction control included) and reset right before each request. A change that adds
 * a statement to one of these paths fails here, on both databases. Every count includes the API key lookup
 * that authenticates the request.
 */

function containerNumber(serial: number): string {
  const firstTen = `MSCU${String(serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

/** Statements of a write transaction besides its own work: BEGIN and COMMIT. */
const TRANSACTION_CONTROL = 2;

/**
 * Statements spent on the organization's lock before its tags are counted: a row lock on PostgreSQL, and on SQLite
 * (one write transaction at a time) a write that changes nothing, so that the transaction holds the write lock
 * before it counts (another process, the reftrail command, may write between). A reference is locked and read,
 * tags included, in one statement on both databases.
 */
const LOCK_STATEMENTS = { sqlite: 1, postgres: 1 } as const;

/**
 * Statements SQLite spends on the events' live positions: one bump of the log's counter per transaction that
 * writes events, whatever their number (PostgreSQL numbers them in the INSERT and at COMMIT).
 */
const POSITION_STATEMENTS = { sqlite: 1, postgres: 0 } as const;

describe.each(DATABASE_KINDS)("hot paths cost a fixed number of statements on %s", (kind) => {
  let server: TestServer;
  let counting = false;
  let statements: string[] = [];
  let referenceIds: string[] = [];
  let tagIds: Record<string, string> = {};

  /** Runs `request` and returns its result and the SQL statements it caused. */
  async function measure<T>(request: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
    statements = [];
    counting = true;
    try {
      const result = await request();
      return { result, statements };
    } finally {
      counting = false;
    }
  }

  beforeAll(async () => {
    // The webhook worker polls the outbox on a timer; its statements would land in the counts at random.
    server = await startTestServer(kind, {
      onQuery: (sql) => {
        if (counting) statements.push(sql);
      },
      env: { WEBHOOK_WORKER: "off" },
    });
    // 60 references: every one tagged "lane", every third "priority", every fifth "customer:acme".
    for (let index = 0; index < 60; index++) {
      const tags = [{ name: "lane" }];
      if (index % 3 === 0) tags.push({ name: "priority" });
      if (index % 5 === 0) tags.push({ name: "customer:acme" });
      const created = await http(server, "POST", "/v1/references", {
        body: { container_id: containerNumber(index), carrier_code: "MSCU", tags },
      });
      expect(created.status).toBe(201);
      referenceIds.push(created.body.reference.id);
      for (const tag of created.body.reference.tags) tagIds[tag.name] = tag.id;
    }
    for (let index = 0; index < 60; index++) {
      await http(server, "POST", `/v1/references/${referenceIds[0]}/extractions`, { body: { status: "succeeded" } });
    }
    // An endpoint, so that events write outbox rows.
    const endpoint = await http(server, "POST", "/v1/webhooks", { body: { url: "http://127.0.0.1:9/hooks" } });
    expect(endpoint.status).toBe(201);
  });
  afterAll(async () => {
    await server?.close();
  });

  it("reads a page of 50 references with their tags in one statement", async () => {
    const { result, statements } = await measure(() => http(server, "GET", "/v1/references?limit=50"));
    expect(result.status).toBe(200);
    expect(result.body.data).toHaveLength(50);
    expect(result.body.data[0].tags.length).toBeGreaterThan(0);
    expect(statements).toHaveLength(1 + 1);
  });

  it("reads a tag-filtered page (all / any, ids and names) in one statement", async () => {
    const filters = [
      `tag_names=priority&tag_names=customer:acme`,
      `tag_names=priority&tag_names=customer:acme&tag_match=any`,
      `tag_ids=${tagIds["priority"]}&tag_ids=${tagIds["customer:acme"]}`,
      `tag_ids=${tagIds["priority"]}&tag_names=customer:acme&tag_match=any`,
      `tag_names=priority&tag_names=no-such-tag`,
    ];
    const expected = [4, 28, 4, 28, 0];
    for (const [index, filter] of filters.entries()) {
      const { result, statements } = await measure(() => http(server, "GET", `/v1/references?limit=50&${filter}`));
      withLabel(filter, () => expectStatus(result, 200));
      withLabel(filter, () => expect(result.body.data).toHaveLength(expected[index]!));
      withLabel(filter, () => expect(statements).toHaveLength(1 + 1));
    }
  });

  it("reads an exclusion-filtered page (alone or with a tag filter, ids and names) in one statement", async () => {
    // 60 references: 20 "priority", 12 "customer:acme", 4 of them both.
    const filters = [
      `exclude_tag_names=priority`,
      `exclude_tag_ids=${tagIds["priority"]}&exclude_tag_names=customer:acme`,
      `tag_names=priority&exclude_tag_names=customer:acme`,
      `tag_ids=${tagIds["priority"]}&tag_names=customer:acme&tag_match=any&exclude_tag_ids=${tagIds["customer:acme"]}`,
      `tag_names=lane&exclude_tag_names=lane`,
      `exclude_tag_names=no-such-tag`,
    ];
    const expected = [40, 32, 16, 16, 0, 50];
    for (const [index, filter] of filters.entries()) {
      const { result, statements } = await measure(() => http(server, "GET", `/v1/references?limit=50&${filter}`));
      withLabel(filter, () => expectStatus(result, 200));
      withLabel(filter, () => expect(result.body.data).toHaveLength(expected[index]!));
      withLabel(filter, () => expect(statements).toHaveLength(1 + 1));
    }
  });

  it("reads a page of events, the reference checked in the same statement", async () => {
    const { result, statements } = await measure(() =>
      http(server, "GET", `/v1/references/${referenceIds[0]}/events?limit=50`),
    );
    expect(result.status).toBe(200);
    expect(result.body.data).toHaveLength(50);
    expect(statements).toHaveLength(1 + 1);
    const missing = await measure(() =>
      http(server, "GET", `/v1/references/01900000-0000-7000-8000-000000000000/events`),
    );
    expect(missing.result.status).toBe(404);
    expect(missing.statements).toHaveLength(1 + 1);
  });

  it("reads a reference with its tags and first 50 events over GraphQL in one statement on PostgreSQL, two on SQLite", async () => {
    const { result, statements } = await measure(() =>
      gqlData<{ reference: { tags: unknown[]; events: { edges: unknown[] } } }>(
        server,
        `query ($id: ID!) { reference(id: $id) { id tags { id name } events(first: 50) { edges { cursor node { id type } } } } }`,
        { id: referenceIds[0] },
      ),
    );
    expect(result.reference.tags).toHaveLength(3);
    expect(result.reference.events.edges).toHaveLength(50);
    // PostgreSQL reads both in one statement (one round trip); SQLite, with no round trip to save, in two cheaper.
    expect(statements).toHaveLength(1 + (kind === "postgres" ? 1 : 2));
  });

  it("writes a lifecycle event with its tag snapshot and outbox rows in a fixed number of statements", async () => {
    // Read the endpoints, lock and read the reference with its tags, update it, insert the event, insert the
    // outbox rows.
    const { result, statements } = await measure(() =>
      http(server, "POST", `/v1/references/${referenceIds[1]}/extractions`, { body: { status: "succeeded" } }),
    );
    expect(result.status).toBe(201);
    expect(statements).toHaveLength(1 + TRANSACTION_CONTROL + POSITION_STATEMENTS[kind] + 5);
    // Both reads are sent before the first write, which on PostgreSQL pipelines them behind BEGIN: one round
    // trip for BEGIN, the endpoints and the lock, then one for the writes, then COMMIT.
    const unit = statements.slice(statements.indexOf("BEGIN") + 1);
    const reads = unit.slice(
      0,
      unit.findIndex((sql) => !/^\s*SELECT\b/.test(sql)),
    );
    expect(reads).toEqual([
      expect.stringContaining('FROM "webhook_endpoints"'),
      expect.stringContaining('FROM "shipping_references"'),
    ]);
  });

  it("ingests a bulk request of 200 items in as many statements as one of 10", async () => {
    const ingest = (count: number) =>
      measure(() =>
        http(server, "POST", "/v1/ingestions", {
          body: {
            items: Array.from({ length: count }, (_, index) =>
              index % 2 === 0
                ? { kind: "extraction", reference_id: referenceIds[index % 60], status: "succeeded" }
                : {
                    kind: "update",
                    reference_id: referenceIds[index % 60],
                    update: { estimated_arrival: null, n: index },
                  },
            ),
          },
        }),
      );
    const ten = await ingest(10);
    const twoHundred = await ingest(200);
    expectStatus(ten.result, 201);
    expectStatus(twoHundred.result, 201);
    expect(twoHundred.result.body.event_count).toBe(200);
    expect(twoHundred.statements).toHaveLength(ten.statements.length);
    // The API key; the references locked and read with their tags; the updates, the references' new states, the
    // events, the endpoints, the outbox rows.
    expect(ten.statements).toHaveLength(1 + TRANSACTION_CONTROL + POSITION_STATEMENTS[kind] + 6);
  });

  it("authenticates the requests of one event-loop turn in one statement, and every later one afresh", async () => {
    const organizations = server.app.services.organizations;
    const other = await server.newOrganization("other");
    const revoked = await organizations.createApiKey(server.organizationId);
    await organizations.revokeApiKey(revoked.id);
    const presented = [server.apiKey, other.apiKey, revoked.key, "rt_unknown", server.apiKey, other.apiKey];
    const { result, statements } = await measure(() =>
      Promise.all(presented.map((key) => organizations.authenticate(key))),
    );
    // A key's use is written at most once a minute (its `last_used_at`), after its first request of the minute:
    // at most one such statement per valid key, and none at all for the same keys again within the minute.
    const recordsUse = (sql: string) => sql.includes(`SET "last_used_at"`);
    expect(statements.filter((sql) => !recordsUse(sql))).toHaveLength(1);
    expect(statements.filter(recordsUse).length).toBeLessThanOrEqual(2);
    const again = await measure(() => Promise.all(presented.map((key) => organizations.authenticate(key))));
    expect(again.statements).toHaveLength(1);
    expect(result.map((caller) => caller?.organizationId ?? null)).toEqual([
      server.organizationId,
      other.organizationId,
      null,
      null,
      server.organizationId,
      other.organizationId,
    ]);
    // Nothing is remembered between turns: a key revoked after the batch is refused by the next request.
    const fresh = await organizations.createApiKey(server.organizationId);
    expect(await organizations.authenticate(fresh.key)).not.toBeNull();
    await organizations.revokeApiKey(fresh.id);
    const after = await measure(() => organizations.authenticate(fresh.key));
    expect(after.result).toBeNull();
    expect(after.statements).toHaveLength(1);
  });

  it("checks a key's scopes without a statement: a scoped key reads in as many statements, a refusal costs only authentication", async () => {
    const created = await http(server, "POST", "/v1/api-keys", {
      body: { name: "reader", scopes: ["references:read"] },
    });
    expectStatus(created, 201);
    const reader = { url: server.url, apiKey: created.body.key as string };
    // Both keys used once this minute, so that no use is recorded below (a key's use is written once a minute).
    expectStatus(await http(reader, "GET", "/v1/tags"), 200);
    expectStatus(await http(server, "GET", "/v1/tags"), 200);
    const full = await measure(() => http(server, "GET", "/v1/tags", { headers: { "cache-control": "no-cache" } }));
    const scoped = await measure(() => http(reader, "GET", "/v1/tags", { headers: { "cache-control": "no-cache" } }));
    expectStatus(scoped.result, 200);
    expect(scoped.statements).toHaveLength(full.statements.length);
    const refused = await measure(() => http(reader, "POST", "/v1/tags", { body: { name: "refused" } }));
    expect(refused.result.status).toBe(403);
    expect(refused.statements).toHaveLength(1);
  });

  it("writes every LIMIT into the statement's text, so that no statement is compiled again on each execution", async () => {
    // SQLite compiles a statement anew on every execution when its LIMIT is bound (src/store/sql/literal-limit.ts),
    // and PostgreSQL plans it anew: the listings of every kind, with and without a cursor, send none.
    const endpoints = await http(server, "GET", "/v1/webhooks");
    expectStatus(endpoints, 200);
    const endpointId = endpoints.body.data[0].id as string;
    const noCache = { headers: { "cache-control": "no-cache" } };
    const firstPage = await http(
      server,
      "GET",
      "/v1/references?limit=7&tag_names=lane&tag_names=priority&tag_match=any",
    );
    expectStatus(firstPage, 200);
    const paths = [
      "/v1/references?limit=7",
      `/v1/references?limit=7&tag_names=lane&tag_names=priority&tag_match=any&cursor=${firstPage.body.next_cursor}`,
      `/v1/references?limit=7&tag_ids=${tagIds["lane"]}&exclude_tag_names=priority`,
      `/v1/tags/${tagIds["priority"]}/references?limit=3`,
      "/v1/tags?limit=2",
      `/v1/references/${referenceIds[0]}/events?limit=5`,
      `/v1/references/${referenceIds[0]}/updates?limit=5`,
      `/v1/webhooks/${endpointId}/deliveries?limit=5`,
      "/v1/events?limit=5",
      "/v1/audit-events?limit=5",
    ];
    const { statements } = await measure(async () => {
      for (const path of paths) {
        const response = await http(server, "GET", path, noCache);
        withLabel(path, () => expectStatus(response, 200));
      }
      const graphql = await gqlData(
        server,
        `{ references(first: 4) { edges { node { id events(first: 3) { edges { cursor } } } } } }`,
      );
      expect(graphql.references.edges).toHaveLength(4);
    });
    const bound = statements.filter((sql) => /\bLIMIT\s+(\?|\$\d+)/i.test(sql));
    expect(bound).toEqual([]);
    expect(statements.filter((sql) => /\bLIMIT\s+\d+/i.test(sql)).length).toBeGreaterThanOrEqual(paths.length);
  });

  it("creates a reference with 10 new tags in as many statements as with 1", async () => {
    const create = (serial: number, tagCount: number) =>
      measure(() =>
        http(server, "POST", "/v1/references", {
          body: {
            container_id: containerNumber(serial),
            carrier_code: "MSCU",
            tags: Array.from({ length: tagCount }, (_, index) => ({ name: `new-${serial}-${index}` })),
          },
        }),
      );
    const one = await create(500, 1);
    const ten = await create(501, 10);
    expect(one.result.status).toBe(201);
    expect(ten.result.status).toBe(201);
    expect(ten.result.body.reference.tags).toHaveLength(10);
    expect(ten.statements).toHaveLength(one.statements.length);
    // The API key; the tags by name, the organization's lock and a second read of the missing
    // names under it, their count (the organization's limit), the insert of the missing ones and the read of
    // their holders; the reference, its tag links and its tag list, its event, the endpoints, the outbox rows.
    expect(ten.statements).toHaveLength(
      1 + TRANSACTION_CONTROL + LOCK_STATEMENTS[kind] + POSITION_STATEMENTS[kind] + 11,
    );
  });
});
