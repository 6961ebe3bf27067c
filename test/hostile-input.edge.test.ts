import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { gql } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Text and dates that one database stores and the other refuses get the same answer on both, from one guard at
 * the edge: NUL (U+0000) and unpaired surrogates anywhere in a REST body, a REST query string, GraphQL variables
 * or GraphQL string literals; date-times outside years 0001–9999 (UTC). The answer is a 4xx naming the field,
 * and nothing is written.
 */

let serial = 0;
function containerNumber(): string {
  const firstTen = `EDGU${String(++serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

const NUL = "a\u0000b";

describe.each(DATABASE_KINDS)("hostile bytes and dates at the edge on %s", (kind) => {
  let server: TestServer;
  let referenceId: string;

  beforeAll(async () => {
    server = await startTestServer(kind);
    const created = await http(server, "POST", "/v1/references", {
      body: { container_id: containerNumber(), carrier_code: "MSCU" },
    });
    expectStatus(created, 201);
    referenceId = created.body.reference.id;
  }, 60_000);
  afterAll(async () => {
    await server?.close();
  });

  /** Rows of the tables a refused request could have written to. */
  async function rowCounts(): Promise<Record<string, number>> {
    const counts: Record<string, number> = {};
    for (const table of ["tags", "shipping_references", "reference_updates", "lifecycle_events", "webhook_endpoints"]) {
      const [row] = await server.database.prisma.$queryRawUnsafe<{ count: unknown }[]>(
        `SELECT COUNT(*) AS "count" FROM "${table}"`,
      );
      counts[table] = Number(row?.count);
    }
    return counts;
  }

  it("refuses NUL in any REST body string or key with 422 and a pointer to it", async () => {
    const before = await rowCounts();
    const cases: [string, unknown, string][] = [
      ["/v1/tags", { name: NUL }, "/name"],
      ["/v1/references", { container_id: containerNumber(), carrier_code: NUL }, "/carrier_code"],
      [`/v1/references/${referenceId}/tags`, { tags: [{ name: "ok" }, { name: NUL }] }, "/tags/1/name"],
      [`/v1/references/${referenceId}/updates`, { notes: { deep: [NUL] } }, "/notes/deep/0"],
      [`/v1/references/${referenceId}/updates`, { [NUL]: 1 }, `/${NUL}`],
      ["/v1/webhooks", { url: "https://hooks.example.com/x", description: NUL }, "/description"],
      [
        `/v1/references/${referenceId}/extractions`,
        { status: "failed", error: { code: NUL, message: "m" } },
        "/error/code",
      ],
      [
        "/v1/ingestions",
        { items: [{ kind: "update", reference_id: referenceId, update: { note: NUL } }] },
        "/items/0/update/note",
      ],
    ];
    for (const [path, body, pointer] of cases) {
      const response = await http(server, "POST", path, { body });
      expect({ path, status: response.status }).toEqual({ path, status: 422 });
      expect(response.body.code).toBe("VALIDATION_FAILED");
      expect(response.body.errors[0]).toMatchObject({ pointer, code: "INVALID_CHARACTER" });
    }
    expect(await rowCounts()).toEqual(before);
  });

  it("refuses NUL in any REST query parameter with 400 naming the parameter", async () => {
    const cases: [string, string][] = [
      ["/v1/references?tag_names=a%00b", "tag_names"],
      ["/v1/references?tag_names=ok&tag_names=a%00b", "tag_names"],
      ["/v1/references?exclude_tag_names=%00", "exclude_tag_names"],
      ["/v1/references?carrier_code=MS%00CU", "carrier_code"],
      ["/v1/references?container_id=%00", "container_id"],
      ["/v1/references?bill_of_lading=%00", "bill_of_lading"],
      ["/v1/references?booking_number=%00", "booking_number"],
      ["/v1/tags?name_prefix=%00", "name_prefix"],
      [`/v1/references/${referenceId}/events?type=%00`, "type"],
    ];
    for (const [path, parameter] of cases) {
      const response = await http(server, "GET", path);
      expect({ path, status: response.status }).toEqual({ path, status: 400 });
      expect(response.body.errors[0].pointer).toBe(parameter);
      expect(response.body.errors[0].message).toContain("NUL");
    }
  });

  it("refuses date-times outside years 0001–9999 in bodies and query strings, and keeps the edges", async () => {
    const before = await rowCounts();
    for (const date of [
      "0000-01-01T00:00:00Z",
      "0001-01-01T00:00:00+01:00", // year 0 in UTC
      "9999-12-31T23:59:59.999-00:01", // year 10000 in UTC
    ]) {
      const update = await http(server, "POST", `/v1/references/${referenceId}/updates`, {
        body: { estimated_arrival: date },
      });
      expect({ date, status: update.status }).toEqual({ date, status: 422 });
      expect(update.body.errors[0]).toMatchObject({ pointer: "/estimated_arrival", code: "INVALID_DATE_TIME" });
      const bulk = await http(server, "POST", "/v1/ingestions", {
        body: { items: [{ kind: "update", reference_id: referenceId, update: { estimated_departure: date } }] },
      });
      expect({ date, status: bulk.status }).toEqual({ date, status: 422 });
      expect(bulk.body.errors[0].pointer).toBe("/items/0/update/estimated_departure");
      const events = await http(server, "GET", `/v1/references/${referenceId}/events?to=${encodeURIComponent(date)}`);
      expect({ date, status: events.status }).toEqual({ date, status: 400 });
      expect(events.body.errors[0].pointer).toBe("to");
    }
    expect(await rowCounts()).toEqual(before);

    // The first and last instants of the range are stored and read back as sent, on both databases.
    const edges = await http(server, "POST", `/v1/references/${referenceId}/updates`, {
      body: { estimated_departure: "0001-01-01T00:00:00Z", estimated_arrival: "9999-12-31T23:59:59.999Z" },
    });
    expectStatus(edges, 201);
    const read = await http(server, "GET", `/v1/references/${referenceId}`);
    expectStatus(read, 200);
    expect(read.body).toMatchObject({
      estimated_departure: "0001-01-01T00:00:00.000Z",
      estimated_arrival: "9999-12-31T23:59:59.999Z",
    });
    const events = await http(server, "GET", `/v1/references/${referenceId}/events?from=0001-01-01T00:00:00Z`);
    expectStatus(events, 200);
  });

  it("refuses NUL in GraphQL variables and literals, and out-of-range dates, naming the field", async () => {
    const before = await rowCounts();
    const variable = await gql(
      server,
      `mutation ($name: String!) { createTag(input: { name: $name }) { tag { id } } }`,
      {
        name: NUL,
      },
    );
    expect(variable.status).toBe(400);
    expect(variable.body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED", field: "name" });

    const update = await gql(
      server,
      `mutation ($input: RecordReferenceUpdateInput!) { recordReferenceUpdate(input: $input) { update { id } } }`,
      { input: { referenceId, update: { note: [NUL] } } },
    );
    expect(update.body.errors?.[0]?.extensions).toMatchObject({
      code: "VALIDATION_FAILED",
      field: "input.update.note.0",
    });

    const filter = await gql(
      server,
      `query ($names: [String!]) { references(filter: { tagNames: $names }) { edges { cursor } } }`,
      {
        names: ["ok", NUL],
      },
    );
    expect(filter.body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED", field: "names.1" });

    const literal = await gql(server, `mutation { createTag(input: { name: "a\\u0000b" }) { tag { id } } }`);
    expect(literal.status).toBe(400);
    expect(literal.body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED", field: "input.name" });
    const listed = await gql(server, `{ references(filter: { tagNames: ["ok", "\\u0000"] }) { edges { cursor } } }`);
    expect(listed.body.errors?.[0]?.extensions).toMatchObject({
      code: "VALIDATION_FAILED",
      field: "filter.tagNames.1",
    });
    const prefix = await gql(server, `{ tags(filter: { namePrefix: "\\u0000" }) { edges { cursor } } }`);
    expect(prefix.body.errors?.[0]?.extensions).toMatchObject({ field: "filter.namePrefix" });

    const date = await gql(
      server,
      `query ($id: ID!, $to: DateTime) { reference(id: $id) { events(filter: { to: $to }) { edges { cursor } } } }`,
      { id: referenceId, to: "0000-06-01T00:00:00Z" },
    );
    expect(date.status).toBe(400);
    expect(date.body.errors?.[0]?.extensions?.code).toBe("BAD_USER_INPUT");
    const documentDate = await gql(
      server,
      `mutation ($input: RecordReferenceUpdateInput!) { recordReferenceUpdate(input: $input) { update { id } } }`,
      { input: { referenceId, update: { estimated_arrival: "0000-01-01T00:00:00Z" } } },
    );
    expect(documentDate.body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED" });
    expect(await rowCounts()).toEqual(before);
  });
});
