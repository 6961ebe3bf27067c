import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gqlData } from "./support/graphql-client.ts";
import { DATABASE_KINDS, ManualClock, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Relay connections work both ways: any edge cursor of `Reference.events` works as `after`
 * and as `before` with the same filter, whichever direction the page that produced it was read in.
 */

const EVENTS = `query ($id: ID!, $first: Int, $after: String, $last: Int, $before: String, $filter: LifecycleEventFilter) {
  reference(id: $id) {
    events(first: $first, after: $after, last: $last, before: $before, filter: $filter) {
      edges { cursor node { id } }
      pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    }
  }
}`;

interface EventsPage {
  readonly edges: { cursor: string; node: { id: string } }[];
  readonly pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; endCursor: string | null };
}

describe.each(DATABASE_KINDS)("Relay cursors of Reference.events on %s", (kind) => {
  let server: TestServer;
  let referenceId: string;
  const clock = new ManualClock(new Date("2026-11-22T12:00:00.000Z"));

  beforeAll(async () => {
    server = await startTestServer(kind, { clock, env: { EXTRACTION_FAILURE_THRESHOLD: "100" } });
    const created = await gqlData(
      server,
      `mutation { createReference(input: { billOfLading: "RELAY-1", carrierCode: "MAEU" }) { reference { id } } }`,
    );
    referenceId = created.createReference.reference.id;
    // Eight more events, alternating types, so that a filter keeps some of them.
    for (let index = 0; index < 8; index++) {
      clock.advance(1_000);
      await gqlData(
        server,
        index % 2 === 0
          ? `mutation ($id: ID!) { recordExtraction(input: { referenceId: $id, status: SUCCEEDED }) { reference { id } } }`
          : `mutation ($id: ID!) { recordExtraction(input: { referenceId: $id, status: FAILED, error: { code: "E", message: "m" } }) { reference { id } } }`,
        { id: referenceId },
      );
    }
  }, 60_000);
  afterAll(async () => server?.close());

  async function page(variables: Record<string, unknown>): Promise<EventsPage> {
    return (await gqlData(server, EVENTS, { id: referenceId, ...variables })).reference.events;
  }

  /** Every edge, read forward (`first`/`after`) or backward (`last`/`before`) in pages of two. */
  async function readAll(direction: "forward" | "backward", filter?: unknown): Promise<EventsPage["edges"]> {
    const edges: EventsPage["edges"] = [];
    let cursor: string | undefined;
    for (;;) {
      const current =
        direction === "forward"
          ? await page({ first: 2, after: cursor, filter })
          : await page({ last: 2, before: cursor, filter });
      if (direction === "forward") edges.push(...current.edges);
      else edges.unshift(...current.edges);
      const more = direction === "forward" ? current.pageInfo.hasNextPage : current.pageInfo.hasPreviousPage;
      if (!more) return edges;
      cursor = direction === "forward" ? current.edges.at(-1)!.cursor : current.edges[0]!.cursor;
    }
  }

  for (const [label, filter] of [
    ["without a filter", undefined],
    ["with a type filter", { types: ["EXTRACTION_FAILED", "REFERENCE_CREATED"] }],
  ] as const) {
    it(`gives the complementary slices around every cursor, whichever direction gave it (${label})`, async () => {
      const forward = await readAll("forward", filter);
      const backward = await readAll("backward", filter);
      const ids = forward.map((edge) => edge.node.id);
      expect(ids.length).toBe(filter ? 5 : 9);
      expect(backward.map((edge) => edge.node.id)).toEqual(ids);

      for (const edges of [forward, backward]) {
        for (const [index, edge] of edges.entries()) {
          const before = await page({ last: 100, before: edge.cursor, filter });
          expect(before.edges.map((e) => e.node.id)).toEqual(ids.slice(0, index));
          expect(before.pageInfo.hasNextPage).toBe(true);
          expect(before.pageInfo.hasPreviousPage).toBe(false);

          const after = await page({ first: 100, after: edge.cursor, filter });
          expect(after.edges.map((e) => e.node.id)).toEqual(ids.slice(index + 1));
          expect(after.pageInfo.hasPreviousPage).toBe(true);
          expect(after.pageInfo.hasNextPage).toBe(false);
        }
      }
    });
  }

  it("still refuses a cursor used with another filter, in both directions", async () => {
    const [first] = (await page({ first: 1 })).edges;
    for (const variables of [
      { first: 1, after: first!.cursor },
      { last: 1, before: first!.cursor },
    ]) {
      const response = await fetch(`${server.url}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": server.apiKey },
        body: JSON.stringify({
          query: EVENTS,
          variables: { id: referenceId, ...variables, filter: { types: ["EXTRACTION_FAILED"] } },
        }),
      });
      const body = (await response.json()) as { errors?: { extensions?: Record<string, unknown> }[] };
      expect(body.errors?.[0]?.extensions?.code).toBe("CURSOR_FILTER_MISMATCH");
    }
  });
});
