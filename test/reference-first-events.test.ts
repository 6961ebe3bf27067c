import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { DATABASE_KINDS, ManualClock, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * `reference(id) { events(first: N) }` reads the reference and the first page of its log in one statement
 * (src/graphql/resolvers/prefetched-events.ts). What it answers must be what the field read on its own answers:
 * `node(id)` reaches the same Reference.events without Query.reference, so it reads the page by itself.
 */

async function gql(server: TestServer, query: string, variables: Record<string, unknown>, apiKey = server.apiKey) {
  const response = await fetch(`${server.url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: JSON.stringify({ query, variables }),
  });
  return (await response.json()) as { data?: any; errors?: any[] };
}

const PAGE = `edges { cursor node { id type occurredAt referenceTags { name } } }
  pageInfo { hasNextPage hasPreviousPage startCursor endCursor }`;

describe.each(DATABASE_KINDS)("a reference with its first events on %s", (kind) => {
  let server: TestServer;
  let id: string;
  const clock = new ManualClock(new Date("2026-11-22T12:00:00.000Z"));
  /** Every statement the server sent, for the test that looks at what the page reads. */
  const statements: string[] = [];

  beforeAll(async () => {
    server = await startTestServer(kind, { clock, onQuery: (sql) => statements.push(sql) });
    const created = await gql(
      server,
      `mutation($input: CreateReferenceInput!) { createReference(input: $input) { reference { id } } }`,
      { input: { billOfLading: "FIRST-EVENTS-1", carrierCode: "MAEU", tags: [{ name: "b" }, { name: "a" }] } },
    );
    id = created.data.createReference.reference.id;
    for (let index = 0; index < 4; index++) {
      // Whole seconds and a fraction with a trailing zero: PostgreSQL's JSON writes them without the zeros.
      clock.advance(index === 2 ? 1_250 : 1_000);
      const recorded = await gql(
        server,
        `mutation($id: ID!) { recordExtraction(input: { referenceId: $id, status: SUCCEEDED }) { reference { id } } }`,
        { id },
      );
      expect(recorded.errors).toBeUndefined();
    }
  });
  afterAll(async () => server?.close());

  /** The same page read through `reference(id)` and through `node(id)`. */
  async function bothWays(events: string) {
    const viaReference = await gql(server, `query($id: ID!) { reference(id: $id) { tags { name } ${events} } }`, {
      id,
    });
    const viaNode = await gql(
      server,
      `query($id: ID!) { node(id: $id) { ... on Reference { tags { name } ${events} } } }`,
      {
        id,
      },
    );
    expect(viaReference.errors).toBeUndefined();
    expect(viaNode.errors).toBeUndefined();
    return { viaReference: viaReference.data.reference, viaNode: viaNode.data.node };
  }

  it("answers a first page forward as the field read alone does, cursors included", async () => {
    const { viaReference, viaNode } = await bothWays(`events(first: 3) { ${PAGE} }`);
    expect(viaReference.tags).toEqual([{ name: "a" }, { name: "b" }]);
    expect(viaReference.events.edges).toHaveLength(3);
    expect(viaReference.events.pageInfo.hasNextPage).toBe(true);
    expect(viaReference).toEqual(viaNode);
    // The cursor of the prefetched page continues the listing.
    const next = await gql(
      server,
      `query($id: ID!, $after: String) { reference(id: $id) { events(first: 3, after: $after) { ${PAGE} } } }`,
      {
        id,
        after: viaReference.events.pageInfo.endCursor,
      },
    );
    expect(next.errors).toBeUndefined();
    expect(next.data.reference.events.edges).toHaveLength(2);
    expect(next.data.reference.events.pageInfo.hasNextPage).toBe(false);
  });

  it("answers a last page backward, and a whole log shorter than the page", async () => {
    const last = await bothWays(`events(last: 2) { ${PAGE} }`);
    expect(last.viaReference.events.edges.map((edge: any) => edge.node.type)).toEqual([
      "EXTRACTION_SUCCEEDED",
      "EXTRACTION_SUCCEEDED",
    ]);
    expect(last.viaReference).toEqual(last.viaNode);
    const whole = await bothWays(`events(first: 50) { ${PAGE} }`);
    expect(whole.viaReference.events.edges).toHaveLength(5);
    expect(whole.viaReference.events.pageInfo.hasNextPage).toBe(false);
    expect(whole.viaReference).toEqual(whole.viaNode);
  });

  it("reads each of several different pages for what it asks", async () => {
    const { viaReference, viaNode } = await bothWays(
      `small: events(first: 1) { ${PAGE} } large: events(first: 4) { ${PAGE} } typed: events(first: 4, filter: { types: [REFERENCE_CREATED] }) { ${PAGE} }`,
    );
    expect(viaReference.small.edges).toHaveLength(1);
    expect(viaReference.large.edges).toHaveLength(4);
    expect(viaReference.typed.edges.map((edge: any) => edge.node.type)).toEqual(["REFERENCE_CREATED"]);
    expect(viaReference).toEqual(viaNode);
  });

  it("takes the page asked for inside a fragment, with variables", async () => {
    const result = await gql(
      server,
      `query($id: ID!, $size: Int) { reference(id: $id) { ...Log } } fragment Log on Reference { events(first: $size) { ${PAGE} } }`,
      { id, size: 2 },
    );
    expect(result.errors).toBeUndefined();
    expect(result.data.reference.events.edges).toHaveLength(2);
  });

  it("reads the events' tag snapshots only for a selection that asks for them, in fragments too", async () => {
    const snapshotsUnread = (sql: string) => sql.includes(`NULL AS "reference_tags"`);
    const read = async (selection: string, fragments = "") => {
      statements.length = 0;
      const result = await gql(
        server,
        `query($id: ID!) { reference(id: $id) { events(first: 3) { edges { node { id ${selection} } } } } } ${fragments}`,
        { id },
      );
      expect(result.errors).toBeUndefined();
      return { events: result.data.reference.events, unread: statements.some(snapshotsUnread) };
    };
    const plain = await read("type");
    expect(plain.unread).toBe(true);
    expect(plain.events.edges.map((edge: any) => edge.node.type)).toEqual([
      "REFERENCE_CREATED",
      "EXTRACTION_SUCCEEDED",
      "EXTRACTION_SUCCEEDED",
    ]);
    const snapshot = [{ name: "a" }, { name: "b" }].sort((x, y) => x.name.localeCompare(y.name));
    const named = await read("...Snapshot", "fragment Snapshot on LifecycleEvent { referenceTags { name } }");
    expect(named.unread).toBe(false);
    const inline = await read("... on LifecycleEvent { referenceTags { name } }");
    expect(inline.unread).toBe(false);
    for (const { events } of [named, inline]) {
      for (const edge of events.edges) {
        expect([...edge.node.referenceTags].sort((x: any, y: any) => x.name.localeCompare(y.name))).toEqual(snapshot);
      }
    }
  });

  it("keeps the errors of a page on the events field and those of the reference on the reference", async () => {
    const refused = await gql(server, `query($id: ID!) { reference(id: $id) { id events(first: 0) { ${PAGE} } } }`, {
      id,
    });
    // The non-null connection's error nulls the reference; the path still tells whose error it is.
    expect(refused.errors).toHaveLength(1);
    expect(refused.errors?.[0]).toMatchObject({
      path: ["reference", "events"],
      extensions: { code: "BAD_USER_INPUT" },
    });
    const missing = await gql(server, `query($id: ID!) { reference(id: $id) { id events(first: 2) { ${PAGE} } } }`, {
      id: "01900000-0000-7000-8000-000000000000",
    });
    expect(missing.errors?.[0]).toMatchObject({ path: ["reference"], extensions: { code: "NOT_FOUND" } });
    const other = await server.newOrganization("other");
    const foreign = await gql(
      server,
      `query($id: ID!) { reference(id: $id) { id events(first: 2) { ${PAGE} } } }`,
      { id },
      other.apiKey,
    );
    expect(foreign.errors?.[0]).toMatchObject({ path: ["reference"], extensions: { code: "NOT_FOUND" } });
  });
});
