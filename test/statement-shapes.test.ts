import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gql } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Issue 34 item 5: filter lists a client may lengthen (tag_ids, exclude_tag_ids, tag_names, with either
 * tag_match) once gave one SQL text per length, and each text stayed prepared in the server (and in every
 * PostgreSQL backend) for ever. Read from /metrics: lists longer than the ones already sent add no statement to
 * the server's caches, and every cache stays within its bound.
 */

/** `reftrail_statement_cache_<metric>` per cache, from /metrics. */
async function statementCaches(server: TestServer, metric: "size" | "max" | "evictions_total") {
  const metrics = await http(server, "GET", "/metrics", { apiKey: null });
  expectStatus(metrics, 200);
  const byCache = new Map<string, number>();
  const line = new RegExp(`^reftrail_statement_cache_${metric}\\{cache="([a-z_]+)"\\} (\\d+)$`, "gm");
  for (const [, cache, value] of (metrics.body as string).matchAll(line)) byCache.set(cache!, Number(value));
  return byCache;
}

const total = (byCache: Map<string, number>) => [...byCache.values()].reduce((sum, value) => sum + value, 0);

describe.each(DATABASE_KINDS)("statements of client-chosen filters on %s", (kind) => {
  let server: TestServer;
  let tagId: string;

  beforeAll(async () => {
    server = await startTestServer(kind);
    const tag = await http(server, "POST", "/v1/tags", { body: { name: "shapes" } });
    expectStatus(tag, 201);
    tagId = tag.body.id;
    for (let index = 0; index < 3; index++) {
      const created = await http(server, "POST", "/v1/references", {
        body: { bill_of_lading: `BL-SHAPES-${index}`, carrier_code: "MAEU", tags: [{ id: tagId }] },
      });
      expectStatus(created, 201);
    }
  });
  afterAll(async () => server?.close());

  /** Every filter shape with `lengths` listed tags: the tag always among them, the rest unknown ids. */
  async function listWithEveryShape(lengths: readonly number[]): Promise<number> {
    let shapes = 0;
    for (const length of lengths) {
      const tagIds = [tagId, ...Array.from({ length: length - 1 }, () => randomUUID())].join(",");
      for (const excluded of [0, 1, 4, 9]) {
        const excludeTagIds = Array.from({ length: excluded }, () => randomUUID()).join(",");
        const exclusion = excluded > 0 ? `&exclude_tag_ids=${excludeTagIds}` : "";
        for (const match of ["any", "all"]) {
          const page = await http(server, "GET", `/v1/references?tag_ids=${tagIds}&tag_match=${match}${exclusion}`);
          expectStatus(page, 200);
          // `any` ignores the unknown tags; `all` finds nothing past the one tag that exists.
          expect(page.body.data).toHaveLength(match === "any" || length === 1 ? 3 : 0);
          shapes++;
        }
        const names = Array.from({ length }, (_, index) => (index === 0 ? "shapes" : `absent-${index}`)).join(
          "&tag_names=",
        );
        expectStatus(await http(server, "GET", `/v1/references?tag_names=${names}&tag_match=any${exclusion}`), 200);
        expectStatus(await http(server, "GET", `/v1/tags/${tagId}/references?${exclusion.slice(1)}`), 200);
        const graphql = await gql(
          server,
          `query ($filter: ReferenceFilter) { references(filter: $filter, first: 10) { edges { node { id } } } }`,
          {
            filter: {
              tagIds: tagIds.split(","),
              tagMatch: "ANY",
              excludeTagIds: excludeTagIds.split(",").filter(Boolean),
            },
          },
        );
        expect(graphql.body.errors).toBeUndefined();
        expect(graphql.body.data.references.edges).toHaveLength(3);
        shapes += 3;
      }
    }
    return shapes;
  }

  it("adds no statement for longer lists, and keeps every cache within its bound", async () => {
    // Every length up to 10 once: the statements a filter needs are prepared now.
    await listWithEveryShape(Array.from({ length: 10 }, (_, index) => index + 1));
    const sizeBefore = await statementCaches(server, "size");
    const evictionsBefore = await statementCaches(server, "evictions_total");
    expect(sizeBefore.size).toBeGreaterThan(0);

    // Longer lists, each length new: as many new shapes of filters as there were before, and no new statement.
    const shapes = await listWithEveryShape(Array.from({ length: 20 }, (_, index) => index + 11));
    expect(shapes).toBeGreaterThanOrEqual(400);
    const sizeAfter = await statementCaches(server, "size");
    expect(total(sizeAfter) - total(sizeBefore)).toBeLessThanOrEqual(2);
    expect(total(await statementCaches(server, "evictions_total"))).toBe(total(evictionsBefore));

    const max = await statementCaches(server, "max");
    for (const [cache, size] of sizeAfter) {
      // PostgreSQL's figure is summed over connections: a few read lanes and pooled connections.
      expect(size).toBeLessThanOrEqual(max.get(cache)! * (kind === "postgres" ? 22 : 1));
    }
  });
});
