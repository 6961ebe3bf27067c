import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { restDriver, type Driver, type Outcome, type ReferenceFilter } from "./support/drivers.ts";
import { graphqlDriver } from "./support/graphql-driver.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { withLabel } from "./support/with-label.ts";

/*
 * Exclusion filters on reference listings (issue 13): `exclude_tag_ids` / `exclude_tag_names` (REST) and
 * `excludeTagIds` / `excludeTagNames` (GraphQL) leave out references carrying any of the tags. On one data set,
 * through both surfaces and both databases: an exclusion returns exactly the complement of the matching
 * inclusion filter (`tag_match=any`), in the same newest-first order, across keyset pages.
 */

const SURFACES = [
  ["rest", restDriver],
  ["graphql", graphqlDriver],
] as const;

function value<T>(outcome: Outcome<T>): T {
  if (!outcome.ok) throw new Error(`expected success, got ${outcome.code} ${JSON.stringify(outcome.body)}`);
  return outcome.value;
}

describe.each(DATABASE_KINDS)("exclusion filters on %s", (kind) => {
  let server: TestServer;
  let owner: { url: string; apiKey: string };
  const tags: Record<"red" | "green" | "blue" | "spare", string> = { red: "", green: "", blue: "", spare: "" };

  beforeAll(async () => {
    server = await startTestServer(kind);
    const { apiKey } = await server.newOrganization("exclusion");
    owner = { url: server.url, apiKey };
    const api = restDriver(owner);
    for (const name of Object.keys(tags) as (keyof typeof tags)[]) tags[name] = value(await api.createTag(name)).id;
    // 36 references cycling through every combination of red/green/blue (none, one, two, all three).
    for (let index = 0; index < 36; index++) {
      const carried = (["red", "green", "blue"] as const).filter((_, bit) => ((index % 8) >> bit) & 1);
      value(
        await api.createReference({
          billOfLading: `BL-EXCL-${index}`,
          carrierCode: "MAEU",
          tags: carried.map((name) => ({ id: tags[name] })),
        }),
      );
    }
  });
  afterAll(async () => server?.close());

  describe.each(SURFACES)("through %s", (surface, makeDriver) => {
    let api: Driver;
    beforeAll(() => {
      api = makeDriver(owner);
    });

    /** Every page of a listing, 7 at a time (so the keyset continues across pages). */
    async function listAll(filter: ReferenceFilter): Promise<string[]> {
      const ids: string[] = [];
      let cursor: string | undefined;
      for (;;) {
        const page = value(await api.listReferences(filter, { limit: 7, cursor }));
        ids.push(...page.items.map((reference) => reference.id));
        if (!page.nextCursor) return ids;
        cursor = page.nextCursor;
      }
    }

    it("returns exactly the complement of the inclusion filter, newest first, across pages", async () => {
      const everything = await listAll({});
      expect(everything).toHaveLength(36);
      expect([...everything].sort().reverse()).toEqual(everything);
      // Newest first: the reference created at `index` (tags from its bits, see beforeAll) is at 35 - index.
      const carrying = (bits: number) =>
        everything.filter((_, position) => ((everything.length - 1 - position) % 8) & bits);
      const RED = 0b001;
      const GREEN = 0b010;
      const BLUE = 0b100;
      // Each inclusion filter, its exclusion and the tag bits of the references the inclusion matches.
      const cases: [ReferenceFilter, ReferenceFilter, number][] = [
        [{ tagIds: [tags.red] }, { excludeTagIds: [tags.red] }, RED],
        [{ tagIds: [tags.red, tags.blue], tagMatch: "any" }, { excludeTagIds: [tags.red, tags.blue] }, RED | BLUE],
        [{ tagNames: ["GREEN"] }, { excludeTagNames: ["green"] }, GREEN],
        [
          { tagIds: [tags.green], tagNames: ["Blue"], tagMatch: "any" },
          { excludeTagIds: [tags.green], excludeTagNames: ["blue"] },
          GREEN | BLUE,
        ],
        [{ tagIds: [tags.spare] }, { excludeTagIds: [tags.spare] }, 0],
      ];
      for (const [inclusion, exclusion, bits] of cases) {
        const included = await listAll(inclusion);
        const excluded = await listAll(exclusion);
        withLabel(JSON.stringify(inclusion), () => expect(included).toEqual(carrying(bits)));
        withLabel(JSON.stringify(exclusion), () =>
          expect(excluded).toEqual(everything.filter((id) => !included.includes(id))),
        );
      }
    });

    it("lists every carrier of any listed tag newest first, for a few tags and for many", async () => {
      // The store merges one newest-first walk per listed tag up to 8 tags, and reads every carrier past that.
      const everything = await listAll({});
      // Newest first: the reference created at `index` (tags from its bits, see beforeAll) is at 35 - index.
      const carrying = (bits: number) =>
        everything.filter((_, position) => ((everything.length - 1 - position) % 8) & bits);
      const redOrGreen = carrying(0b011);
      const blue = carrying(0b100);
      expect(redOrGreen).toHaveLength(27);
      const unknownNames = Array.from({ length: 7 }, (_, index) => `no-such-tag-${index}`);
      for (const filter of [
        { tagIds: [tags.red, tags.green], tagMatch: "any" },
        { tagIds: [tags.red], tagNames: ["green", ...unknownNames], tagMatch: "any" },
      ] as const) {
        const label = JSON.stringify(filter);
        const listed = await listAll(filter);
        withLabel(label, () => expect(listed).toEqual(redOrGreen));
        // An exclusion is checked on the way of each walk, not after a page was cut.
        const excluding = await listAll({ ...filter, excludeTagIds: [tags.blue] });
        withLabel(label, () => expect(excluding).toEqual(redOrGreen.filter((id) => !blue.includes(id))));
      }
    });

    it("combines with inclusion filters, tag_match and column filters", async () => {
      const red = await listAll({ tagIds: [tags.red] });
      const green = await listAll({ tagIds: [tags.green] });
      const blue = await listAll({ tagIds: [tags.blue] });
      expect(await listAll({ tagIds: [tags.red], excludeTagNames: ["GREEN"] })).toEqual(
        red.filter((id) => !green.includes(id)),
      );
      const redOrGreen = await listAll({ tagIds: [tags.red, tags.green], tagMatch: "any" });
      expect(await listAll({ tagIds: [tags.red, tags.green], tagMatch: "any", excludeTagIds: [tags.blue] })).toEqual(
        redOrGreen.filter((id) => !blue.includes(id)),
      );
      const redAndGreen = await listAll({ tagIds: [tags.red, tags.green] });
      expect(await listAll({ tagIds: [tags.red, tags.green], excludeTagIds: [tags.blue] })).toEqual(
        redAndGreen.filter((id) => !blue.includes(id)),
      );
      const active = await listAll({ active: true, excludeTagIds: [tags.red] });
      expect(active).toEqual((await listAll({})).filter((id) => !red.includes(id)));
      // A tag excluded and required at once leaves nothing.
      expect(await listAll({ tagIds: [tags.red], excludeTagIds: [tags.red] })).toEqual([]);
    });

    it("ignores unknown tags to exclude, refuses malformed ids, and binds cursors to the exclusion", async () => {
      const everything = await listAll({});
      expect(
        await listAll({ excludeTagIds: ["01900000-0000-7000-8000-000000000000"], excludeTagNames: ["nope"] }),
      ).toEqual(everything);
      const malformed = await api.listReferences({ excludeTagIds: [tags.red, "not-an-id"] });
      expect(malformed.ok).toBe(false);
      if (!malformed.ok) {
        expect(malformed.code).toBe(surface === "rest" ? "INVALID_QUERY_PARAMETER" : "BAD_USER_INPUT");
        expect(malformed.fields[0]).toMatch(/^(filter\.)?exclude_?[tT]ag_?[iI]ds/);
      }
      const first = value(await api.listReferences({ excludeTagIds: [tags.red] }, { limit: 3 }));
      const mismatch = await api.listReferences(
        { excludeTagIds: [tags.green] },
        { limit: 3, cursor: first.nextCursor! },
      );
      expect(mismatch.ok).toBe(false);
      if (!mismatch.ok) expect(mismatch.code).toBe("CURSOR_FILTER_MISMATCH");
    });
  });

  it("REST: /v1/tags/{id}/references takes the same exclusions", async () => {
    const list = async (path: string) => {
      const result = await http(owner, "GET", `${path}${path.includes("?") ? "&" : "?"}limit=500`);
      expectStatus(result, 200);
      return result.body.data.map((reference: any) => reference.id as string);
    };
    const red = await list(`/v1/tags/${tags.red}/references`);
    const blue = await list(`/v1/references?tag_ids=${tags.blue}`);
    const green = await list(`/v1/references?tag_ids=${tags.green}`);
    expect(await list(`/v1/tags/${tags.red}/references?exclude_tag_names=BLUE`)).toEqual(
      red.filter((id: string) => !blue.includes(id)),
    );
    expect(await list(`/v1/tags/${tags.red}/references?exclude_tag_ids=${tags.blue},${tags.green}`)).toEqual(
      red.filter((id: string) => !blue.includes(id) && !green.includes(id)),
    );
    const refused = await http(owner, "GET", `/v1/references?exclude_tag_ids=${tags.red},bad`);
    expect(refused.status).toBe(400);
    expect(refused.body.errors[0].pointer).toBe("exclude_tag_ids");
  });

  it("REST: tag_match=none is refused with the allowed values and where exclusion lives", async () => {
    const refused = await http(owner, "GET", `/v1/references?tag_ids=${tags.red}&tag_match=none`);
    expect(refused.status).toBe(400);
    expect(refused.body.errors).toEqual([{ pointer: "tag_match", code: "ENUM", message: "must be one of all, any" }]);
    expect(refused.body.detail).toBe(
      "query parameter tag_match must be one of all, any " +
        "(to leave out references carrying tags, use exclude_tag_ids or exclude_tag_names)",
    );
  });
});
