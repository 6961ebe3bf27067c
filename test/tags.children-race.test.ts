import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { containerNumber } from "./support/container-numbers.ts";
import { expectStatus, http, type HttpResult } from "./support/http.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Reporting children (each copies its parent's tags, SPEC §6/§8) while the parent's tags are renamed and deleted,
 * through two instances on one PostgreSQL database (one instance on SQLite, which runs one write at a time).
 * A report holds its parent and links each child to the tags; a rename or deletion holds the tag and rewrites
 * its carriers' tag lists, the parent among them. Taken in opposite orders, the two deadlocked and PostgreSQL
 * aborted one of them: a 500. Every request must now succeed, and the outcome must be the one some serial
 * order gives: each child carries exactly the parent's surviving tags (every surviving tag stayed on the parent
 * the whole time, and a deleted one left every carrier), under their current names, and a deleted tag is on no
 * reference, neither in the lists references keep nor in their links.
 */

const ROUNDS = 40;
const TAGS_PER_PARENT = 6;
/** Tag indexes renamed (twice each, at once), deleted, and left alone in each round. */
const RENAMED = [0, 1, 2];
const DELETED = [3, 4];
const REPORTS = 4;
const CONTAINERS_PER_REPORT = 3;

interface TagRef {
  readonly id: string;
  readonly name: string;
}

interface ReferenceBody {
  readonly id: string;
  readonly container_id: string | null;
  readonly tags: TagRef[];
}

describe.each(DATABASE_KINDS)("children reported while the parent's tags are renamed and deleted, on %s", (kind) => {
  let first: TestServer;
  let second: TestServer | undefined;

  beforeAll(async () => {
    first = await startTestServer(kind, { env: { WEBHOOK_WORKER: "off" } });
    if (kind === "postgres") second = await startInstanceOn(first, { env: { WEBHOOK_WORKER: "off" } });
  }, 60_000);
  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  /** The instances in turn: the n-th request goes to one, the next to the other. */
  const instance = (n: number): TestServer => (second && n % 2 === 1 ? second : first);

  it(`answers every request and leaves a consistent state (${ROUNDS} rounds)`, async () => {
    const unexpected: string[] = [];
    const check = (what: string, result: HttpResult, status: number) => {
      if (result.status !== status) unexpected.push(`${what}: ${result.status} ${JSON.stringify(result.body)}`);
    };
    const inconsistencies: string[] = [];

    for (let round = 0; round < ROUNDS; round++) {
      const created = await http(first, "POST", "/v1/references", {
        body: {
          bill_of_lading: `RACE${String(round).padStart(6, "0")}`,
          carrier_code: "MSCU",
          tags: Array.from({ length: TAGS_PER_PARENT }, (_, index) => ({ name: `r${round}-t${index}` })),
        },
      });
      expectStatus(created, 201);
      const parent: ReferenceBody = created.body.reference;
      const tagIds = [...parent.tags].sort((a, b) => a.name.localeCompare(b.name)).map((tag) => tag.id);
      // A deletion that failed (before the fix, a 500) left its tag: the state is checked against what succeeded.
      const deleted = new Set<string>();
      const reported: string[] = [];
      const containers = Array.from({ length: REPORTS }, (_, report) =>
        Array.from({ length: CONTAINERS_PER_REPORT }, (_, index) =>
          containerNumber("RACU", round * 100 + report * CONTAINERS_PER_REPORT + index),
        ),
      );

      let n = round;
      const requests: Promise<void>[] = [
        ...containers.map((containerIds, report) =>
          http(instance(n++), "POST", `/v1/references/${parent.id}/children`, {
            body: { container_ids: containerIds },
          }).then((result) => {
            check(`round ${round} report ${report}`, result, 200);
            if (result.status === 200) reported.push(...containerIds);
          }),
        ),
        ...RENAMED.flatMap((index) =>
          ["a", "b"].map((spelling) =>
            http(instance(n++), "PATCH", `/v1/tags/${tagIds[index]}`, {
              body: { name: `r${round}-renamed${index}${spelling}` },
            }).then((result) => check(`round ${round} rename ${index}${spelling}`, result, 200)),
          ),
        ),
        ...DELETED.map((index) =>
          http(instance(n++), "DELETE", `/v1/tags/${tagIds[index]}`).then((result) => {
            check(`round ${round} delete ${index}`, result, 204);
            if (result.status === 204) deleted.add(tagIds[index]!);
          }),
        ),
      ];
      await Promise.all(requests);
      const surviving = tagIds.filter((id) => !deleted.has(id)).sort();

      // The state every instance reads now that every request has been answered.
      const names = new Map<string, string>();
      for (const id of surviving) {
        const tag = await http(first, "GET", `/v1/tags/${id}`);
        expectStatus(tag, 200);
        names.set(id, tag.body.name);
      }
      for (const id of deleted) expectStatus(await http(first, "GET", `/v1/tags/${id}`), 404);

      const listed = await http(first, "GET", `/v1/references?parent_reference_id=${parent.id}&limit=500`);
      expectStatus(listed, 200);
      const children: ReferenceBody[] = listed.body.data;
      const reread = await http(first, "GET", `/v1/references/${parent.id}`);
      expectStatus(reread, 200);
      const carriers: ReferenceBody[] = [reread.body, ...children];

      const found = children.map((child) => child.container_id!).sort();
      if (JSON.stringify(found) !== JSON.stringify(reported.sort())) {
        inconsistencies.push(`round ${round}: children ${found.join(",")} instead of ${reported.join(",")}`);
      }
      for (const reference of carriers) {
        const carried = reference.tags.map((tag) => tag.id).sort();
        if (JSON.stringify(carried) !== JSON.stringify(surviving)) {
          inconsistencies.push(`round ${round}: ${reference.id} carries ${carried.join(",")}`);
        }
        for (const tag of reference.tags) {
          if (names.has(tag.id) && names.get(tag.id) !== tag.name) {
            inconsistencies.push(`round ${round}: ${reference.id} lists ${tag.name}, the tag is ${names.get(tag.id)}`);
          }
        }
      }
      // The links agree with the lists: every carrier is found through each surviving tag.
      for (const id of surviving) {
        const through = await http(first, "GET", `/v1/tags/${id}/references?limit=500`);
        expectStatus(through, 200);
        const linked = (through.body.data as ReferenceBody[]).map((reference) => reference.id).sort();
        const expected = carriers.map((reference) => reference.id).sort();
        if (JSON.stringify(linked) !== JSON.stringify(expected)) {
          inconsistencies.push(`round ${round}: tag ${id} links ${linked.length} of ${expected.length} carriers`);
        }
      }
    }

    // A deleted tag is on no reference of the organization (the links went with it by their foreign key).
    const tagsListed = new Set<string>();
    let cursor: string | null = null;
    do {
      const page: HttpResult = await http(
        first,
        "GET",
        `/v1/references?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`,
      );
      expectStatus(page, 200);
      for (const reference of page.body.data as ReferenceBody[])
        for (const tag of reference.tags) tagsListed.add(tag.id);
      cursor = page.body.next_cursor;
    } while (cursor);
    const known = await http(first, "GET", "/v1/tags?limit=500");
    expectStatus(known, 200);
    const existing = new Set((known.body.data as TagRef[]).map((tag) => tag.id));

    const failures = unexpected.filter((line) => / 500 /.test(line)).length;
    expect({ failures, unexpected }).toEqual({ failures: 0, unexpected: [] });
    expect(inconsistencies).toEqual([]);
    expect([...tagsListed].filter((id) => !existing.has(id))).toEqual([]);
  }, 300_000);
});
