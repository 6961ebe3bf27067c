import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Prisma } from "../src/store/sql/sql-template.ts";
import { expectEventually } from "./support/expect-eventually.ts";
import { gql } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Each API key's cost budget (docs/decisions.md, "Cost budgets"): every GraphQL response publishes its cost in
 * `extensions.cost`, REST answers carry `RateLimit-Policy` / `RateLimit`, a key that has spent its bucket is
 * refused THROTTLED (HTTP 429, `Retry-After`), and two instances on one PostgreSQL database share one bucket.
 * The small buckets below restore 0.001 per second, so that a test's own duration changes what they hold by less
 * than one unit (Retry-After by at most the test's seconds).
 */

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Estimate 7 (`tags` 1 + 3 × `pageInfo` 2); actual 3 (`tags`, `pageInfo`, `hasNextPage`), whatever the data. */
const PAGE_INFO_QUERY = `query PageInfo { tags(first: 3) { pageInfo { hasNextPage } } }`;
const SLOW = 0.001;

interface Cost {
  requestedQueryCost: number;
  actualQueryCost: number;
  throttleStatus: { maximumAvailable: number; currentlyAvailable: number; restoreRate: number };
}

function costOf(body: unknown): Cost {
  const cost = (body as { extensions?: { cost?: Cost } } | undefined)?.extensions?.cost;
  if (!cost) throw new Error(`no extensions.cost in ${JSON.stringify(body)}`);
  return cost;
}

async function keyWithBudget(server: TestServer, maximum: number, restoreRate: number) {
  const issued = await server.app.services.organizations.createApiKey(server.organizationId, {
    budget: { maximum, restoreRate },
  });
  return { url: server.url, apiKey: issued.key, id: issued.id };
}

async function cli(databaseUrl: string, ...args: string[]) {
  const { stdout } = await run(process.execPath, ["bin/reftrail.mjs", ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: databaseUrl },
  });
  return JSON.parse(stdout) as Record<string, unknown>;
}

describe.each(DATABASE_KINDS)("cost budget (%s)", (kind) => {
  let server: TestServer;
  let tagId: string;

  beforeAll(async () => {
    server = await startTestServer(kind, { env: { WEBHOOK_WORKER: "off" } });
    const created = await http(server, "POST", "/v1/tags", { body: { name: "budget" } });
    expectStatus(created, 201);
    tagId = created.body.id;
  });
  afterAll(async () => {
    await server?.close();
  });

  it("publishes extensions.cost on data, errors, mutations and cached answers", async () => {
    const key = await keyWithBudget(server, 1000, SLOW);
    const first = await gql(key, PAGE_INFO_QUERY);
    expect(first.status).toBe(200);
    expect(costOf(first.body)).toEqual({
      requestedQueryCost: 7,
      actualQueryCost: 3,
      throttleStatus: { maximumAvailable: 1000, currentlyAvailable: 997, restoreRate: SLOW },
    });
    // The same query again is answered by the read cache: charged and published like the first.
    const again = await gql(key, PAGE_INFO_QUERY);
    expect(again.body).toEqual({
      ...first.body,
      extensions: {
        cost: {
          ...costOf(first.body),
          throttleStatus: { maximumAvailable: 1000, currentlyAvailable: 994, restoreRate: SLOW },
        },
      },
    });
    // A document that does not validate ran nothing and costs nothing.
    const invalid = await gql(key, "{ nope }");
    expect(invalid.status).toBe(400);
    expect(costOf(invalid.body)).toMatchObject({ requestedQueryCost: 0, actualQueryCost: 0 });
    expect(costOf(invalid.body).throttleStatus.currentlyAvailable).toBe(994);
    // An error in execution: the reference is not found, the field is null.
    const missing = await gql(key, `{ node(id: "00000000-0000-7000-8000-000000000000") { id } }`);
    const missingCost = costOf(missing.body);
    expect(missingCost.requestedQueryCost).toBe(2);
    expect(missingCost.actualQueryCost).toBe(1);
    const mutation = await gql(key, `mutation { createTag(input: { name: "priced" }) { tag { id name } } }`);
    expect(mutation.body.errors).toBeUndefined();
    const mutationCost = costOf(mutation.body);
    expect(mutationCost.actualQueryCost).toBeGreaterThan(0);
    expect(mutationCost.actualQueryCost).toBeLessThanOrEqual(mutationCost.requestedQueryCost);
  });

  it("refuses a key that has spent its budget with THROTTLED and an exact Retry-After", async () => {
    const key = await keyWithBudget(server, 10, SLOW);
    const startedAt = Date.now();
    // 10 → 7 after the charge of 7, 3 after the second charge, then 7 once the refunds of 4 are back.
    const first = await gql(key, PAGE_INFO_QUERY, {}, { headers: { "cache-control": "no-cache" } });
    expect(costOf(first.body).throttleStatus.currentlyAvailable).toBe(7);
    const second = await gql(key, PAGE_INFO_QUERY, {}, { headers: { "cache-control": "no-cache" } });
    expect(costOf(second.body).throttleStatus.currentlyAvailable).toBe(4);
    const refused = await gql(key, PAGE_INFO_QUERY, {}, { headers: { "cache-control": "no-cache" } });
    expect(refused.status).toBe(429);
    expect(refused.body.data).toBeUndefined();
    expect(refused.body.errors?.[0]?.extensions?.code).toBe("THROTTLED");
    expect(costOf(refused.body)).toMatchObject({
      requestedQueryCost: 7,
      actualQueryCost: 0,
      throttleStatus: { maximumAvailable: 10, currentlyAvailable: 4, restoreRate: SLOW },
    });
    // 3 missing at 0.001 per second: 3,000 s, less what restored while the test ran.
    const retryAfter = Number(refused.headers.get("retry-after"));
    const elapsedSeconds = Math.ceil((Date.now() - startedAt) / 1000);
    expect(retryAfter).toBeLessThanOrEqual(3000);
    expect(retryAfter).toBeGreaterThanOrEqual(3000 - elapsedSeconds);
    expect(refused.body.errors?.[0]?.extensions?.retryAfterSeconds).toBe(retryAfter);
    // An answer the read cache holds (kept for the organization by another key's request) is refused the same way.
    expect((await gql(server, PAGE_INFO_QUERY)).status).toBe(200);
    const cached = await gql(key, PAGE_INFO_QUERY);
    expect(cached.status).toBe(429);
    expect(cached.body.errors?.[0]?.extensions?.code).toBe("THROTTLED");
    expect(costOf(cached.body)).toMatchObject({ requestedQueryCost: 7, actualQueryCost: 0 });
    expect(Number(cached.headers.get("retry-after"))).toBeGreaterThan(2000);
    // REST draws from the same bucket: 4 left, a read of one tag costs 1; the fifth read is refused.
    const rest = await http(key, "GET", `/v1/tags/${tagId}`);
    expectStatus(rest, 200);
    expect(rest.headers.get("ratelimit")).toBe('"default";r=3;t=7000');
    for (let read = 0; read < 3; read++) expectStatus(await http(key, "GET", `/v1/tags/${tagId}`), 200);
    const refusedRest = await http(key, "GET", `/v1/tags/${tagId}`);
    expectStatus(refusedRest, 429);
    expect(refusedRest.headers.get("content-type")).toContain("application/problem+json");
    expect(refusedRest.body.code).toBe("THROTTLED");
    const restRetry = Number(refusedRest.headers.get("retry-after"));
    expect(restRetry).toBeLessThanOrEqual(1000);
    expect(restRetry).toBeGreaterThanOrEqual(1000 - Math.ceil((Date.now() - startedAt) / 1000));
  });

  it("sends RateLimit-Policy and RateLimit on REST answers; a page costs its size", async () => {
    const key = await keyWithBudget(server, 1000, SLOW);
    const page = await http(key, "GET", "/v1/tags?limit=20");
    expectStatus(page, 200);
    expect(page.headers.get("ratelimit-policy")).toBe('"default";q=1000;w=1000000');
    expect(page.headers.get("ratelimit")).toBe('"default";r=980;t=20000');
    const one = await http(key, "GET", `/v1/tags/${tagId}`);
    expect(one.headers.get("ratelimit")).toBe('"default";r=979;t=21000');
    const defaultPage = await http(key, "GET", "/v1/tags");
    expect(defaultPage.headers.get("ratelimit")).toBe('"default";r=929;t=71000');
    // The server's defaults for a key without its own.
    const plain = await http(server, "GET", `/v1/tags/${tagId}`);
    expect(plain.headers.get("ratelimit-policy")).toBe('"default";q=100000;w=2');
  });

  it("prices a feed poll by the rows it reads; a tag filter that names no tag reads none", async () => {
    const org = await server.newOrganization("feed price");
    const owner = { url: server.url, apiKey: org.apiKey };
    expectStatus(await http(owner, "POST", "/v1/tags", { body: { name: "on-no-event" } }), 201);
    const created = await http(owner, "POST", "/v1/references", {
      body: { booking_number: "BK-PRICE", carrier_code: "MAEU" },
    });
    expectStatus(created, 201);
    const referenceId = created.body.reference.id as string;
    const items = Array.from({ length: 299 }, () => ({
      kind: "extraction",
      reference_id: referenceId,
      status: "succeeded",
    }));
    expectStatus(await http(owner, "POST", "/v1/ingestions", { body: { items } }), 201);
    const issued = await server.app.services.organizations.createApiKey(org.organizationId, {
      budget: { maximum: 10_000, restoreRate: SLOW },
    });
    const key = { url: server.url, apiKey: issued.key };
    // 300 events, none carrying the tag: the poll reads them all for a page of one.
    const scan = await http(key, "GET", "/v1/events?limit=1&tag_names=on-no-event");
    expectStatus(scan, 200);
    expect(scan.body.data).toEqual([]);
    expect(scan.headers.get("ratelimit")).toMatch(/^"default";r=9700;/);
    // A name no tag bears matches nothing: the poll goes to the end of the log without reading it, for its page.
    const nothing = await http(key, "GET", "/v1/events?limit=1&tag_names=no-such-tag");
    expectStatus(nothing, 200);
    expect(nothing.body).toMatchObject({ data: [], has_more: false });
    expect(nothing.headers.get("ratelimit")).toMatch(/^"default";r=9699;/);
    // A page that reads what it returns costs its size.
    const page = await http(key, "GET", "/v1/events?limit=10");
    expect(page.body.data).toHaveLength(10);
    expect(page.headers.get("ratelimit")).toMatch(/^"default";r=9689;/);
  });

  it("takes a key's own budget set from outside with the reftrail command", async () => {
    const key = await keyWithBudget(server, 1000, SLOW);
    const updated = await cli(
      server.database.url,
      "key",
      "update",
      key.id,
      "--budget-maximum",
      "2",
      "--budget-restore-rate",
      String(SLOW),
    );
    expect(updated).toMatchObject({ api_key_id: key.id, budget_maximum: 2, budget_restore_rate: SLOW });
    expectStatus(await http(key, "GET", `/v1/tags/${tagId}`), 200);
    const refused = await http(key, "GET", `/v1/tags/${tagId}`);
    // The bucket kept what it held (999) capped at the new maximum: 2, then 1 after the first read, then 0.
    expect([200, 429]).toContain(refused.status);
    const third = await http(key, "GET", `/v1/tags/${tagId}`);
    expectStatus(third, 429);
    expect(third.headers.get("ratelimit-policy")).toBe('"default";q=2;w=2000');
    const back = await cli(server.database.url, "key", "update", key.id, "--budget-maximum", "default");
    expect(back).toMatchObject({ budget_maximum: null, budget_restore_rate: SLOW });
  });

  it("never grants parallel requests more than the bucket holds", async () => {
    const key = await keyWithBudget(server, 40, SLOW);
    const answers = await Promise.all(
      Array.from({ length: 100 }, () => http(key, "GET", `/v1/tags/${tagId}`).then((result) => result.status)),
    );
    expect(answers.filter((status) => status === 200)).toHaveLength(40);
    expect(answers.filter((status) => status === 429)).toHaveLength(60);
  });
});

describe("one budget across two instances on one PostgreSQL database", () => {
  let first: TestServer;
  let second: TestServer;
  let tagId: string;

  beforeAll(async () => {
    first = await startTestServer("postgres", { env: { WEBHOOK_WORKER: "off" } });
    second = await startInstanceOn(first, { env: { WEBHOOK_WORKER: "off" } });
    const created = await http(first, "POST", "/v1/tags", { body: { name: "shared" } });
    expectStatus(created, 201);
    tagId = created.body.id;
  });
  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  it("grants parallel requests on both instances no more than the one bucket holds", async () => {
    const issued = await first.app.services.organizations.createApiKey(first.organizationId, {
      budget: { maximum: 60, restoreRate: SLOW },
    });
    const requests = Array.from({ length: 160 }, (_, index) => {
      const instance = index % 2 === 0 ? first : second;
      // Half REST reads (cost 1), half GraphQL queries (charged 7, refunded to 3 once answered).
      return index % 4 < 2
        ? http({ url: instance.url, apiKey: issued.key }, "GET", `/v1/tags/${tagId}`).then((result) => ({
            status: result.status,
            spent: result.status === 200 ? 1 : 0,
          }))
        : gql(
            { url: instance.url, apiKey: issued.key },
            PAGE_INFO_QUERY,
            {},
            {
              headers: { "cache-control": "no-cache" },
            },
          ).then((result) => ({ status: result.status, spent: result.status === 200 ? 3 : 0 }));
    });
    const answers = await Promise.all(requests);
    for (const answer of answers) expect([200, 429]).toContain(answer.status);
    const granted = answers.filter((answer) => answer.status === 200);
    // Refunds come back only after a request ran, so what was spent is at most the bucket: 60 (plus < 1 restored).
    expect(granted.reduce((sum, answer) => sum + answer.spent, 0)).toBeLessThanOrEqual(60);
    expect(granted.length).toBeGreaterThan(0);
    expect(answers.some((answer) => answer.status === 429)).toBe(true);
    // Both instances refuse the key now: the bucket they share is spent.
    for (const instance of [first, second]) {
      const refused = await http({ url: instance.url, apiKey: issued.key }, "GET", "/v1/tags?limit=30");
      expectStatus(refused, 429);
    }
  });

  it("grants a busy key's requests on one instance from that instance's share, with no statement each", async () => {
    const issued = await first.app.services.organizations.createApiKey(first.organizationId, {
      budget: { maximum: 1000, restoreRate: SLOW },
    });
    const key = { url: first.url, apiKey: issued.key };
    const row = async () =>
      (
        await first.database.sql.all<{ available: number; refilled_at: number }>(
          Prisma.sql`SELECT "available", "refilled_at" FROM "api_key_budgets" WHERE "api_key_id" = ${issued.id}`,
        )
      )[0];
    expectStatus(await http(key, "GET", `/v1/tags/${tagId}`), 200);
    const afterFirst = await row();
    // 1,000 less the read (1) and the instance's share (5 % of the maximum), which the other instance cannot spend.
    expect(Number(afterFirst?.available)).toBeCloseTo(949);
    for (let read = 2; read <= 10; read++) {
      const answer = await http(key, "GET", `/v1/tags/${tagId}`);
      expectStatus(answer, 200);
      // Still what the one bucket holds, as this instance knows it.
      expect(answer.headers.get("ratelimit")).toBe(`"default";r=${1000 - read};t=${read * 1000}`);
    }
    // The reads after the first were granted from the share: no statement wrote the row.
    expect(await row()).toEqual(afterFirst);
  });

  it("reports the bucket refilled since the share was taken, as a statement would find it", async () => {
    // Refilled within a microsecond: every answer must report the bucket full less its own read, as the first did.
    const issued = await first.app.services.organizations.createApiKey(first.organizationId, {
      budget: { maximum: 1000, restoreRate: 1_000_000 },
    });
    const key = { url: first.url, apiKey: issued.key };
    const row = async () =>
      (
        await first.database.sql.all<{ available: number; refilled_at: number }>(
          Prisma.sql`SELECT "available", "refilled_at" FROM "api_key_budgets" WHERE "api_key_id" = ${issued.id}`,
        )
      )[0];
    const firstRead = await http(key, "GET", `/v1/tags/${tagId}`);
    expectStatus(firstRead, 200);
    expect(firstRead.headers.get("ratelimit")).toMatch(/^"default";r=999;/);
    const afterFirst = await row();
    const firstQuery = await gql(key, PAGE_INFO_QUERY, {}, { headers: { "cache-control": "no-cache" } });
    for (let read = 0; read < 5; read++) {
      const answer = await http(key, "GET", `/v1/tags/${tagId}`);
      expectStatus(answer, 200);
      expect(answer.headers.get("ratelimit")).toMatch(/^"default";r=999;/);
      const query = await gql(key, PAGE_INFO_QUERY, {}, { headers: { "cache-control": "no-cache" } });
      expect(costOf(query.body)).toEqual(costOf(firstQuery.body));
    }
    // Granted from the share: no statement wrote the row after the first read.
    expect(await row()).toEqual(afterFirst);
  });

  it("gives an instance's unused share back to the bucket, for the other instance to spend", async () => {
    const issued = await first.app.services.organizations.createApiKey(first.organizationId, {
      budget: { maximum: 100, restoreRate: SLOW },
    });
    expectStatus(await http({ url: first.url, apiKey: issued.key }, "GET", `/v1/tags/${tagId}`), 200);
    // All that is left (99), on the other instance: granted once the first instance's share (5) is back in the row.
    await expectEventually(
      async () => (await http({ url: second.url, apiKey: issued.key }, "GET", "/v1/tags?limit=99")).status,
      (status) => expect(status).toBe(200),
    );
  });
});
