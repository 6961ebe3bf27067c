import { getIntrospectionQuery } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { gql, gqlData } from "./support/graphql-client.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/* Errors through GraphQL over HTTP: codes, fields, statuses, limits and masking. */

function containerNumber(serial: number): string {
  const firstTen = `TGHU${String(serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

const CREATE_REFERENCE = `
  mutation ($input: CreateReferenceInput!) {
    createReference(input: $input) { reference { id containerId tags { id name } } }
  }`;

const MISSING_ID = "01900000-0000-7000-8000-000000000000";

describe.each(DATABASE_KINDS)("GraphQL errors on %s", (kind) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer(kind);
  }, 60_000);

  afterAll(async () => {
    await server?.close();
  });

  async function referenceCount(): Promise<number> {
    const data = await gqlData(server, `{ references(first: 500) { edges { node { id } } } }`);
    return data.references.edges.length;
  }

  async function tagNamed(prefix: string): Promise<string[]> {
    const data = await gqlData(
      server,
      `query ($p: String) { tags(filter: { namePrefix: $p }) { edges { node { name } } } }`,
      { p: prefix },
    );
    return data.tags.edges.map((edge: { node: { name: string } }) => edge.node.name);
  }

  describe("authentication", () => {
    it("answers 401 UNAUTHENTICATED without a key", async () => {
      const { status, headers, body } = await gql(server, `{ tags { edges { node { id } } } }`, {}, { apiKey: null });
      expect(status).toBe(401);
      expect(headers.get("www-authenticate")).toMatch(/^Bearer/);
      expect(body.data ?? null).toBeNull();
      expect(body.errors?.[0]?.extensions?.code).toBe("UNAUTHENTICATED");
      expect(body.errors?.[0]?.message).toMatch(/API key/);
    });

    it("answers 401 UNAUTHENTICATED with an unknown key, even for introspection", async () => {
      for (const query of [`{ tags { edges { node { id } } } }`, `{ __typename }`]) {
        const { status, body } = await gql(server, query, {}, { apiKey: "rt_not-a-real-key" });
        expect(status).toBe(401);
        expect(body.errors?.[0]?.extensions?.code).toBe("UNAUTHENTICATED");
      }
    });

    it("accepts the key as Authorization: Bearer", async () => {
      const { status, body } = await gql(
        server,
        `{ __typename }`,
        {},
        { apiKey: null, headers: { authorization: `Bearer ${server.apiKey}` } },
      );
      expect(status).toBe(200);
      expect(body).toMatchObject({ data: { __typename: "Query" }, extensions: { cost: { requestedQueryCost: 0 } } });
    });
  });

  describe("not found", () => {
    it("reports NOT_FOUND for a missing reference, a malformed id and a missing tag", async () => {
      for (const [query, id] of [
        [`query ($id: ID!) { reference(id: $id) { id } }`, MISSING_ID],
        [`query ($id: ID!) { reference(id: $id) { id } }`, "not-an-id"],
        [`query ($id: ID!) { tag(id: $id) { id } }`, MISSING_ID],
      ] as const) {
        const { status, body } = await gql(server, query, { id });
        expect(status).toBe(200);
        expect(body.errors?.[0]?.extensions?.code).toBe("NOT_FOUND");
        expect(Object.values(body.data ?? {})).toEqual([null]);
      }
    });

    it("treats another organization's reference as missing", async () => {
      const other = await server.newOrganization("other");
      const created = await gqlData({ url: server.url, apiKey: other.apiKey }, CREATE_REFERENCE, {
        input: { containerId: containerNumber(1), carrierCode: "MAEU" },
      });
      const id = created.createReference.reference.id;
      const { body } = await gql(server, `query ($id: ID!) { reference(id: $id) { id } }`, { id });
      expect(body.data?.reference).toBeNull();
      expect(body.errors?.[0]?.extensions?.code).toBe("NOT_FOUND");
      const mutation = await gql(
        server,
        `mutation ($id: ID!) { reactivateReference(input: { referenceId: $id }) { reference { id } } }`,
        { id },
      );
      expect(mutation.body.errors?.[0]?.extensions?.code).toBe("NOT_FOUND");
    });
  });

  describe("input validation", () => {
    it("rejects an invalid tag name with VALIDATION_FAILED at input.tags.1.name, and saves nothing", async () => {
      const before = await referenceCount();
      const { status, body } = await gql(server, CREATE_REFERENCE, {
        input: {
          containerId: containerNumber(2),
          carrierCode: "MAEU",
          tags: [{ name: "would-be-created" }, { name: "x".repeat(101) }],
        },
      });
      expect(status).toBe(200);
      // Root fields are nullable (a field a key may not reach must leave the others standing): the failed
      // mutation is null in its own place.
      expect(body.data?.createReference ?? null).toBeNull();
      const error = body.errors?.[0];
      expect(error?.extensions?.code).toBe("VALIDATION_FAILED");
      expect(error?.extensions?.field).toBe("input.tags.1.name");
      expect(error?.extensions?.issues).toEqual([
        { field: "input.tags.1.name", code: "TOO_LONG", message: expect.any(String) },
      ]);
      expect(error?.path).toEqual(["createReference"]);
      expect(await referenceCount()).toBe(before);
      expect(await tagNamed("would-be-created")).toEqual([]);
    });

    it("reports every invalid field of createReference at once", async () => {
      const { body } = await gql(server, CREATE_REFERENCE, {
        input: { containerId: "ABCU1234567", carrierCode: "12345" },
      });
      const fields = (body.errors?.[0]?.extensions?.issues as { field: string }[]).map((issue) => issue.field);
      expect(fields).toEqual(["input.containerId", "input.carrierCode"]);
    });

    it("rejects a tag entry with both id and name (@oneOf), in the document or in variables, and saves nothing", async () => {
      const before = await referenceCount();
      const literal = await gql(
        server,
        `mutation { createReference(input: { containerId: "${containerNumber(3)}", carrierCode: "MAEU", tags: [{ id: "${MISSING_ID}", name: "both" }] }) { reference { id } } }`,
      );
      expect(literal.status).toBe(400);
      expect(literal.body.errors?.[0]?.extensions?.code).toBe("GRAPHQL_VALIDATION_FAILED");
      expect(literal.body.errors?.[0]?.message).toMatch(/exactly one/i);

      const viaVariables = await gql(server, CREATE_REFERENCE, {
        input: { containerId: containerNumber(3), carrierCode: "MAEU", tags: [{ id: MISSING_ID, name: "both" }] },
      });
      expect(viaVariables.status).toBe(400);
      expect(viaVariables.body.errors?.[0]?.extensions?.code).toBe("BAD_USER_INPUT");
      expect(viaVariables.body.errors?.[0]?.message).toMatch(/exactly one/i);

      expect(await referenceCount()).toBe(before);
      expect(await tagNamed("both")).toEqual([]);
    });

    it("reports an unknown tag id at its entry", async () => {
      const { body } = await gql(server, CREATE_REFERENCE, {
        input: { containerId: containerNumber(4), carrierCode: "MAEU", tags: [{ name: "fine" }, { id: MISSING_ID }] },
      });
      expect(body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED", field: "input.tags.1.id" });
    });

    it("requires an error for a failed extraction", async () => {
      const created = await gqlData(server, CREATE_REFERENCE, {
        input: { containerId: containerNumber(5), carrierCode: "MAEU" },
      });
      const { body } = await gql(
        server,
        `mutation ($id: ID!) { recordExtraction(input: { referenceId: $id, status: FAILED }) { reference { id } } }`,
        { id: created.createReference.reference.id },
      );
      expect(body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED", field: "input.error" });
    });

    it("locates an invalid date in an update document under input.update", async () => {
      const created = await gqlData(server, CREATE_REFERENCE, {
        input: { containerId: containerNumber(6), carrierCode: "MAEU" },
      });
      const { body } = await gql(
        server,
        `mutation ($input: RecordReferenceUpdateInput!) { recordReferenceUpdate(input: $input) { update { id } } }`,
        {
          input: {
            referenceId: created.createReference.reference.id,
            update: { estimated_arrival: "2026-12-01T10:00:00" },
          },
        },
      );
      expect(body.errors?.[0]?.extensions).toMatchObject({
        code: "VALIDATION_FAILED",
        field: "input.update.estimated_arrival",
      });
    });

    it("rejects page sizes outside 1..500 with BAD_USER_INPUT naming the argument", async () => {
      for (const [query, field] of [
        [`{ references(first: 501) { edges { cursor } } }`, "first"],
        [`{ tags(first: 0) { edges { cursor } } }`, "first"],
        [`query ($id: ID!) { reference(id: $id) { events(last: 1000) { edges { cursor } } } }`, "last"],
      ] as const) {
        const created = await gqlData(server, CREATE_REFERENCE, {
          input: { billOfLading: "BL-PAGES", carrierCode: "MAEU" },
        });
        const { body } = await gql(server, query, { id: created.createReference.reference.id });
        expect(body.errors?.[0]?.extensions).toMatchObject({ code: "BAD_USER_INPUT", field });
        expect(body.errors?.[0]?.message).toMatch(/1 to 500/);
      }
    });

    it("rejects a malformed cursor with INVALID_CURSOR at after", async () => {
      const { body } = await gql(server, `{ references(after: "garbage") { edges { cursor } } }`);
      expect(body.errors?.[0]?.extensions).toMatchObject({ code: "INVALID_CURSOR", field: "after" });
    });

    it("rejects a malformed filter id with BAD_USER_INPUT at its place in the filter", async () => {
      const { body } = await gql(server, `{ references(filter: { tagIds: ["nope"] }) { edges { cursor } } }`);
      expect(body.errors?.[0]?.extensions).toMatchObject({ code: "BAD_USER_INPUT", field: "filter.tagIds.0" });
    });

    it("rejects a date-time without an offset, and from after to", async () => {
      const created = await gqlData(server, CREATE_REFERENCE, {
        input: { containerId: containerNumber(7), carrierCode: "MAEU" },
      });
      const id = created.createReference.reference.id;
      const query = `query ($id: ID!, $filter: LifecycleEventFilter) { reference(id: $id) { events(filter: $filter) { edges { cursor } } } }`;
      const noOffset = await gql(server, query, { id, filter: { from: "2026-11-22T00:00:00" } });
      expect(noOffset.status).toBe(400);
      expect(noOffset.body.errors?.[0]?.extensions?.code).toBe("BAD_USER_INPUT");
      expect(noOffset.body.errors?.[0]?.message).toMatch(/offset/);
      const reversed = await gql(server, query, {
        id,
        filter: { from: "2026-11-23T00:00:00Z", to: "2026-11-22T00:00:00+01:00" },
      });
      expect(reversed.body.errors?.[0]?.extensions).toMatchObject({ code: "INVALID_RANGE", field: "filter.from" });
    });
  });

  describe("conflicts", () => {
    it("reports CONFLICT naming the existing tag when a name is taken in any case", async () => {
      const created = await gqlData(server, `mutation { createTag(input: { name: "Urgent" }) { tag { id name } } }`);
      const { status, body } = await gql(server, `mutation { createTag(input: { name: "  urgent " }) { tag { id } } }`);
      expect(status).toBe(200);
      expect(body.errors?.[0]?.extensions).toEqual({
        code: "CONFLICT",
        existingTag: { id: created.createTag.tag.id, name: "Urgent" },
      });
      expect(body.errors?.[0]?.message).toMatch(/Urgent/);
    });

    it("reports CONFLICT when reactivating an active reference", async () => {
      const created = await gqlData(server, CREATE_REFERENCE, {
        input: { containerId: containerNumber(8), carrierCode: "MAEU" },
      });
      const { body } = await gql(
        server,
        `mutation ($id: ID!) { reactivateReference(input: { referenceId: $id }) { reference { id } } }`,
        {
          id: created.createReference.reference.id,
        },
      );
      expect(body.errors?.[0]?.extensions?.code).toBe("CONFLICT");
    });
  });

  describe("operation limits", () => {
    it("rejects an operation nested deeper than the maximum depth with a clear message", async () => {
      const nested = `${"parent { ".repeat(12)}id${" }".repeat(12)}`;
      const { status, body } = await gql(server, `query ($id: ID!) { reference(id: $id) { ${nested} } }`, {
        id: MISSING_ID,
      });
      expect(status).toBe(400);
      expect(body.data ?? null).toBeNull();
      const error = body.errors?.[0];
      expect(error?.extensions).toMatchObject({
        code: "GRAPHQL_VALIDATION_FAILED",
        limit: { kind: "depth", maximum: 12, actual: 14 },
      });
      expect(error?.message).toBe(
        "The operation is nested 14 fields deep; the maximum is 12. Split it into several operations.",
      );
    });

    it("rejects an operation with more aliases than the maximum, naming the count", async () => {
      const aliases = (count: number) =>
        Array.from({ length: count }, (_, i) => `r${i}: reference(id: $id) { id }`).join(" ");
      const { status, body } = await gql(server, `query ($id: ID!) { ${aliases(31)} }`, { id: MISSING_ID });
      expect(status).toBe(400);
      expect(body.errors?.[0]).toMatchObject({
        message: "The operation uses 31 aliases; the maximum is 30. Split it into several operations.",
        extensions: { code: "GRAPHQL_VALIDATION_FAILED", limit: { kind: "aliases", maximum: 30, actual: 31 } },
      });
      const atLimit = await gql(server, `query ($id: ID!) { ${aliases(30)} }`, { id: MISSING_ID });
      expect(atLimit.status).toBe(200);
      expect(atLimit.body.errors?.[0]?.extensions?.code).toBe("NOT_FOUND");
    });

    it("stops parsing a document past the maximum number of tokens", async () => {
      const { status, body } = await gql(server, `{ ${"__typename ".repeat(10_000)}}`);
      expect(status).toBe(400);
      expect(body.errors?.[0]).toMatchObject({
        message: expect.stringMatching(/Document contains more th[ae]t? 10000 tokens/),
        extensions: { code: "GRAPHQL_PARSE_FAILED" },
      });
      expect((await gql(server, `{ ${"__typename ".repeat(200)}}`)).status).toBe(200);
    });

    it("accepts an operation at the maximum depth", async () => {
      const nested = `${"parent { ".repeat(10)}id${" }".repeat(10)}`;
      const { status, body } = await gql(server, `query ($id: ID!) { reference(id: $id) { ${nested} } }`, {
        id: MISSING_ID,
      });
      expect(status).toBe(200);
      expect(body.errors?.[0]?.extensions?.code).toBe("NOT_FOUND");
    });

    it("rejects an operation over the maximum cost, also when page sizes come from variables", async () => {
      const literal = await gql(
        server,
        `{ references(first: 500) { edges { node { tags { references(first: 500) { edges { node { id } } } } } } } }`,
      );
      expect(literal.status).toBe(400);
      expect(literal.body.errors?.[0]?.extensions).toMatchObject({
        code: "GRAPHQL_VALIDATION_FAILED",
        limit: { kind: "cost", maximum: 50_000 },
      });
      expect(literal.body.errors?.[0]?.message).toMatch(
        /^The operation's estimated cost is \d+; the maximum is 50000\./,
      );

      const query = `query ($n: Int) { references(first: $n) { edges { node { tags { references(first: $n) { edges { node { id } } } } } } } }`;
      const small = await gql(server, query, { n: 5 });
      expect(small.status).toBe(200);
      expect(small.body.errors).toBeUndefined();
      // Every answer depends on the caller's key: never stored by a cache, refused or not.
      expect(small.headers.get("cache-control")).toBe("no-store");
      expect(literal.headers.get("cache-control")).toBe("no-store");
      const large = await gql(server, query, { n: 500 });
      expect(large.status).toBe(400);
      expect(large.body.errors?.[0]?.extensions?.limit).toMatchObject({ kind: "cost" });
      // A pass is remembered per document and per value of the variables the cost depends on (limits.ts):
      // a second pass of the small values, then the large ones again, still refused.
      expect((await gql(server, query, { n: 5 })).status).toBe(200);
      expect((await gql(server, query, { n: 500 })).status).toBe(400);

      // An absent variable takes its default (500 pages), an explicit null the field's default (50).
      const defaulted = `query ($n: Int = 500) { references(first: $n) { edges { node { tags { references(first: 10) { edges { node { id } } } } } } } }`;
      expect((await gql(server, defaulted, { n: null })).status).toBe(200);
      const absent = await gql(server, defaulted, {});
      expect(absent.status).toBe(400);
      expect(absent.body.errors?.[0]?.extensions?.limit).toMatchObject({ kind: "cost" });

      // @include and @skip decide which fields count.
      const included = `query ($deep: Boolean!) { references(first: 500) { edges { node { tags @include(if: $deep) { references(first: 500) { edges { node { id } } } } } } } }`;
      expect((await gql(server, included, { deep: false })).status).toBe(200);
      expect((await gql(server, included, { deep: true })).status).toBe(400);
    });

    it("answers the standard introspection query", async () => {
      const { status, body } = await gql(
        server,
        getIntrospectionQuery({ descriptions: true, specifiedByUrl: true, inputValueDeprecation: true }),
      );
      expect(status).toBe(200);
      expect(body.errors).toBeUndefined();
      const types = (body.data.__schema.types as { name: string }[]).map((type) => type.name);
      expect(types).toEqual(expect.arrayContaining(["Reference", "Tag", "LifecycleEvent", "TagEntryInput"]));
    });

    it("rejects introspection that nests type lists too deeply", async () => {
      const { status, body } = await gql(
        server,
        `{ __schema { types { fields { type { fields { type { fields { name } } } } } } } }`,
      );
      expect(status).toBe(400);
      expect(body.errors?.[0]?.extensions?.limit).toMatchObject({ kind: "introspection-depth" });
    });
  });

  describe("transport", () => {
    it("answers malformed JSON with 400 in GraphQL's error shape", async () => {
      const response = await fetch(`${server.url}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": server.apiKey },
        body: "{ not json",
      });
      expect(response.status).toBe(400);
      const body = (await response.json()) as { errors: { extensions: { code: string } }[] };
      expect(body.errors[0]?.extensions.code).toBe("MALFORMED_JSON");
    });

    it("serves the explorer page to a browser without a key, and GraphQL over GET to clients", async () => {
      const page = await fetch(`${server.url}/graphql`, {
        headers: { accept: "text/html,application/xhtml+xml,*/*;q=0.8" },
      });
      expect(page.status).toBe(200);
      expect(page.headers.get("content-type")).toMatch(/^text\/html/);
      expect(await page.text()).toContain("reftrail GraphQL explorer");

      const get = await fetch(`${server.url}/graphql?query=${encodeURIComponent("{ __typename }")}`, {
        headers: { accept: "application/json", "x-api-key": server.apiKey },
      });
      expect(get.status).toBe(200);
      expect(await get.json()).toMatchObject({ data: { __typename: "Query" }, extensions: { cost: {} } });
    });

    it("refuses mutations over GET", async () => {
      const response = await fetch(
        `${server.url}/graphql?query=${encodeURIComponent('mutation { createTag(input: { name: "via-get" }) { tag { id } } }')}`,
        {
          headers: { accept: "application/json", "x-api-key": server.apiKey },
        },
      );
      expect(response.status).toBe(405);
      expect(await tagNamed("via-get")).toEqual([]);
    });
  });
});

describe.each(DATABASE_KINDS)("unexpected GraphQL errors on %s", (kind) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer(kind);
  }, 60_000);

  afterAll(async () => {
    await server?.close();
  });

  it("masks a failure it did not anticipate as INTERNAL_SERVER_ERROR and still answers the rest", async () => {
    const created = await gqlData(server, CREATE_REFERENCE, {
      input: { containerId: containerNumber(9), carrierCode: "MAEU" },
    });
    const id = created.createReference.reference.id;
    // A real failure, not a mock: the table behind Reference.updates disappears under the running server.
    await server.database.prisma.$executeRawUnsafe(`DROP TABLE "reference_updates"`);

    const { status, body } = await gql(
      server,
      `query ($id: ID!) { reference(id: $id) { id updates { edges { cursor } } } }`,
      { id },
    );
    expect(status).toBe(200);
    expect(body.data).toEqual({ reference: null });
    expect(body.errors).toEqual([
      {
        message: "Internal server error",
        locations: expect.any(Array),
        path: ["reference", "updates"],
        extensions: { code: "INTERNAL_SERVER_ERROR" },
      },
    ]);
    expect(JSON.stringify(body)).not.toMatch(/reference_updates|prisma|exist/i);
  });
});
