import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { graphqlDriver } from "./support/graphql-driver.ts";
import { restDriver, type Driver, type Outcome } from "./support/drivers.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * The behaviour suite of tags, references and reference filtering: every scenario runs through REST and through GraphQL, on SQLite
 * and on PostgreSQL.
 */

const SURFACES = [
  ["rest", restDriver],
  ["graphql", graphqlDriver],
] as const;

function value<T>(outcome: Outcome<T>): T {
  if (!outcome.ok) throw new Error(`expected success, got ${outcome.code} ${JSON.stringify(outcome.body)}`);
  return outcome.value;
}

function failure<T>(outcome: Outcome<T>): { code: string; fields: string[] } {
  if (outcome.ok) throw new Error(`expected failure, got ${JSON.stringify(outcome.value)}`);
  return outcome;
}

let counter = 0;
/** Distinct valid ISO 6346 container numbers. */
function containerNumber(): string {
  counter += 1;
  const firstTen = `TSTU${String(counter).padStart(6, "0")}`;
  const values: Record<string, number> = { T: 31, S: 30, U: 32 };
  let sum = 0;
  for (let i = 0; i < 10; i++) {
    const char = firstTen[i]!;
    sum += (char >= "0" && char <= "9" ? Number(char) : values[char]!) * 2 ** i;
  }
  return `${firstTen}${(sum % 11) % 10}`;
}

describe.each(DATABASE_KINDS)("tags and references on %s", (kind) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(kind, { env: { MAX_TAGS_PER_REFERENCE: "5" } });
  });
  afterAll(async () => server?.close());

  describe.each(SURFACES)("through %s", (surface, makeDriver) => {
    let api: Driver;
    beforeAll(() => {
      api = makeDriver(server);
    });
    const unique = (name: string) => `${surface}-${name}`;

    it("creates, reads, renames, lists and deletes tags; names are unique case-insensitively", async () => {
      const tag = value(await api.createTag(`  ${unique("Urgent")}  `));
      expect(tag.name).toBe(unique("Urgent"));
      expect(value(await api.getTag(tag.id))).toEqual(tag);

      const duplicate = failure(await api.createTag(unique("URGENT")));
      expect(duplicate.code).toBe("CONFLICT");

      const renamed = value(await api.renameTag(tag.id, unique("urgent")));
      expect(renamed).toEqual({ id: tag.id, name: unique("urgent") });

      const other = value(await api.createTag(unique("other")));
      expect(failure(await api.renameTag(other.id, unique("URGENT"))).code).toBe("CONFLICT");

      const listed = value(await api.listTags({ namePrefix: unique("URG") }));
      expect(listed.items.map((t) => t.id)).toEqual([tag.id]);

      expect(value(await api.deleteTag(tag.id))).toBe(true);
      expect(failure(await api.getTag(tag.id)).code).toBe("NOT_FOUND");
      expect(failure(await api.deleteTag(tag.id)).code).toBe("NOT_FOUND");
    });

    it("rejects invalid tag names with a pointer to the field", async () => {
      for (const name of ["", "   ", "x".repeat(101), "bell\u0007"]) {
        const error = failure(await api.createTag(name));
        expect(error.code).toBe("VALIDATION_FAILED");
        expect(error.fields).toContain("name");
      }
      // 100 code points of a character outside the BMP is still 100 characters.
      const longest = `${surface[0]}${"😀".repeat(99)}`;
      expect(value(await api.createTag(longest)).name).toBe(longest);
    });

    it("pages through tags with cursors, no tag skipped or repeated", async () => {
      const prefix = unique("page-");
      for (let i = 0; i < 7; i++) value(await api.createTag(`${prefix}${i}`));
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = value(await api.listTags({ namePrefix: prefix, limit: 3, cursor }));
        seen.push(...page.items.map((t) => t.name));
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      expect(seen).toEqual([0, 1, 2, 3, 4, 5, 6].map((i) => `${prefix}${i}`));
    });

    it("creates a reference with tags by name and by id, deduplicated, matching names case-insensitively", async () => {
      const existing = value(await api.createTag(unique("Reefer")));
      const container = containerNumber();
      const reference = value(
        await api.createReference({
          containerId: ` ${container.slice(0, 4).toLowerCase()} ${container.slice(4)} `,
          carrierCode: "maeu",
          tags: [
            { name: unique("reefer") },
            { id: existing.id },
            { name: unique("hazmat") },
            { name: unique("HAZMAT") },
          ],
        }),
      );
      expect(reference.containerId).toBe(container);
      expect(reference.carrierCode).toBe("MAEU");
      expect(reference.active).toBe(true);
      expect(reference.tags.map((t) => t.name).sort()).toEqual([unique("Reefer"), unique("hazmat")].sort());
      expect(value(await api.getReference(reference.id))).toEqual(reference);
    });

    it("rejects a request with one invalid tag entry and saves nothing", async () => {
      const before = value(await api.listTags({ namePrefix: unique("atomic") })).items.length;
      const attempts: unknown[][] = [
        [{ name: unique("atomic-ok") }, { name: "x".repeat(101) }],
        [{ name: unique("atomic-ok") }, { id: "0190a0c0-0000-7000-8000-000000000000" }],
      ];
      for (const tags of attempts) {
        const error = failure(await api.createReference({ containerId: containerNumber(), carrierCode: "MAEU", tags }));
        expect(error.code).toBe("VALIDATION_FAILED");
        expect(error.fields.some((field) => field.startsWith("tags.1"))).toBe(true);
      }
      expect(value(await api.listTags({ namePrefix: unique("atomic") })).items.length).toBe(before);
    });

    it("rejects tag entries that are not exactly one of id or name", async () => {
      const reference = value(await api.createReference({ bookingNumber: "BK-1", carrierCode: "MSCU" }));
      for (const entry of [{ id: reference.id, name: "both" }, {}]) {
        const error = failure(await api.addTags(reference.id, [entry]));
        expect(["VALIDATION_FAILED", "BAD_USER_INPUT"]).toContain(error.code);
      }
      expect(value(await api.getReference(reference.id)).tags).toEqual([]);
    });

    it("validates identifiers: exactly one, ISO 6346 check digit, SCAC", async () => {
      const cases = [
        { input: { containerId: "CSQU3054384", carrierCode: "MAEU" }, field: "containerId" },
        { input: { containerId: containerNumber(), billOfLading: "BOL1", carrierCode: "MAEU" }, field: "" },
        { input: { carrierCode: "MAEU" }, field: "" },
        { input: { bookingNumber: "BK1", carrierCode: "M1" }, field: "carrierCode" },
      ];
      for (const { input, field } of cases) {
        const error = failure(await api.createReference(input));
        expect(error.code).toBe("VALIDATION_FAILED");
        if (field) expect(error.fields).toContain(field);
      }
    });

    it("adds tags idempotently, removes a tag without deleting it, and enforces the per-reference limit", async () => {
      const reference = value(await api.createReference({ billOfLading: "BOL-LIMIT", carrierCode: "HLCU" }));
      const first = value(await api.addTags(reference.id, [{ name: unique("a") }, { name: unique("b") }]));
      const again = value(await api.addTags(reference.id, [{ name: unique("A") }, { name: unique("b") }]));
      expect(again.map((t) => t.id).sort()).toEqual(first.map((t) => t.id).sort());

      const a = first.find((t) => t.name === unique("a"))!;
      expect(value(await api.removeTag(reference.id, a.id))).toBe(true);
      expect(value(await api.removeTag(reference.id, a.id))).toBe(true); // not there any more: still fine
      expect(value(await api.getTag(a.id)).name).toBe(unique("a"));
      expect(value(await api.getReference(reference.id)).tags.map((t) => t.name)).toEqual([unique("b")]);

      // limit is 5 in this server: 1 present + 5 new = 6
      const tooMany = [1, 2, 3, 4, 5].map((i) => ({ name: unique(`limit-${i}`) }));
      expect(failure(await api.addTags(reference.id, tooMany)).code).toBe("LIMIT_EXCEEDED");
      expect(value(await api.getReference(reference.id)).tags).toHaveLength(1);
      expect(value(await api.listTags({ namePrefix: unique("limit-") })).items).toEqual([]);

      expect(failure(await api.removeTag(reference.id, "0190a0c0-0000-7000-8000-000000000000")).code).toBe("NOT_FOUND");
      expect(failure(await api.removeTag("0190a0c0-0000-7000-8000-000000000000", a.id)).code).toBe("NOT_FOUND");
    });

    it("filters references by tags (all / any, ids and names), state and identifiers, newest first", async () => {
      const red = value(await api.createTag(unique("red")));
      const blue = value(await api.createTag(unique("blue")));
      const both = value(
        await api.createReference({
          containerId: containerNumber(),
          carrierCode: "CMDU",
          tags: [{ id: red.id }, { id: blue.id }],
        }),
      );
      const onlyRed = value(
        await api.createReference({ containerId: containerNumber(), carrierCode: "CMDU", tags: [{ id: red.id }] }),
      );
      const onlyBlue = value(
        await api.createReference({ bookingNumber: "BK-FILTER", carrierCode: "ONEY", tags: [{ id: blue.id }] }),
      );

      const ids = async (filter: Parameters<Driver["listReferences"]>[0]) =>
        value(await api.listReferences(filter)).items.map((r) => r.id);

      expect(await ids({ tagIds: [red.id, blue.id] })).toEqual([both.id]);
      expect(await ids({ tagIds: [red.id], tagNames: [unique("BLUE")] })).toEqual([both.id]);
      expect(await ids({ tagNames: [unique("red"), unique("blue")], tagMatch: "any" })).toEqual([
        onlyBlue.id,
        onlyRed.id,
        both.id,
      ]);
      expect(await ids({ tagNames: [unique("red"), "no-such-tag"] })).toEqual([]);
      expect(await ids({ tagNames: [unique("red"), "no-such-tag"], tagMatch: "any" })).toEqual([onlyRed.id, both.id]);
      expect(await ids({ tagIds: [red.id], carrierCode: "cmdu" })).toEqual([onlyRed.id, both.id]);
      expect(await ids({ tagIds: [blue.id], containerId: both.containerId! })).toEqual([both.id]);

      expect(value(await api.listTagReferences(red.id)).items.map((r) => r.id)).toEqual([onlyRed.id, both.id]);
      expect(failure(await api.listTagReferences("0190a0c0-0000-7000-8000-000000000000")).code).toBe("NOT_FOUND");

      const malformed = failure(await api.listReferences({ tagIds: ["not-an-id"] }));
      expect(["INVALID_QUERY_PARAMETER", "BAD_USER_INPUT"]).toContain(malformed.code);
    });

    it("pages through references newest first with cursors", async () => {
      const tag = value(await api.createTag(unique("paging")));
      const created: string[] = [];
      for (let i = 0; i < 5; i++) {
        created.push(
          value(
            await api.createReference({ containerId: containerNumber(), carrierCode: "MAEU", tags: [{ id: tag.id }] }),
          ).id,
        );
      }
      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = value(await api.listReferences({ tagIds: [tag.id] }, { limit: 2, cursor }));
        seen.push(...page.items.map((r) => r.id));
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      expect(seen).toEqual([...created].reverse());
    });

    it("keeps organizations apart: another organization's objects are not found", async () => {
      const mine = value(
        await api.createReference({
          billOfLading: "BOL-PRIVATE",
          carrierCode: "MAEU",
          tags: [{ name: unique("private") }],
        }),
      );
      const other = await server.newOrganization("other");
      const theirs = makeDriver({ url: server.url, apiKey: other.apiKey });
      expect(failure(await theirs.getReference(mine.id)).code).toBe("NOT_FOUND");
      expect(failure(await theirs.getTag(mine.tags[0]!.id)).code).toBe("NOT_FOUND");
      expect(failure(await theirs.addTags(mine.id, [{ name: "x" }])).code).toBe("NOT_FOUND");
      expect(value(await theirs.listReferences({})).items).toEqual([]);
      // Their tag of the same name is a different tag.
      expect(value(await theirs.createTag(unique("private"))).id).not.toBe(mine.tags[0]!.id);
    });

    it("creates exactly one tag when 50 requests upsert the same new name at once", async () => {
      const references = await Promise.all(
        Array.from({ length: 5 }, () => api.createReference({ billOfLading: "BOL-RACE", carrierCode: "MAEU" })),
      );
      const name = unique(`race-${Date.now()}`);
      const outcomes = await Promise.all(
        Array.from({ length: 50 }, (_, i) => api.addTags(value(references[i % 5]!).id, [{ name }])),
      );
      const ids = new Set(outcomes.map((outcome) => value(outcome)[0]!.id));
      expect(ids.size).toBe(1);
      expect(value(await api.listTags({ namePrefix: name })).items).toHaveLength(1);
    });
  });
});
