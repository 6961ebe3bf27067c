import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import WebSocket, { type RawData } from "ws";
import { containerNumber } from "./support/container-numbers.ts";
import { eventually, graphqlWsUrl } from "./support/subscription-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * An update document is stored as sent (SPEC §8). JSON numbers that a JSON parser cannot keep exactly — ones that
 * overflow to Infinity, integers beyond ±(2^53−1) — are refused with a pointer to the member, through REST and
 * GraphQL (variables and literals), single updates and bulk ingestion alike, instead of being stored as `null` or
 * as a neighbouring integer; a non-zero number that underflows to 0 (`1e-400`) is refused the same way, anywhere in
 * a body, and through graphql-ws variables too. Date-times inside an update, in query parameters and in recovery windows share one
 * parser: lowercase `t`/`z` are accepted (RFC 3339 allows them), hour 24 is refused (RFC 3339 forbids it).
 */

let serial = 0;

const RECORD_UPDATE = `
  mutation ($input: RecordReferenceUpdateInput!) {
    recordReferenceUpdate(input: $input) { update { id document } }
  }`;

/** POSTs raw GraphQL JSON text (variables written as text, so that their numbers reach the server as written). */
async function rawGraphql(server: TestServer, body: string): Promise<{ status: number; body: any }> {
  const response = await fetch(`${server.url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": server.apiKey },
    body,
  });
  return { status: response.status, body: await response.json() };
}

describe.each(DATABASE_KINDS)("an update document is stored as sent on %s", (kind) => {
  let server: TestServer;
  let referenceId: string;

  beforeAll(async () => {
    server = await startTestServer(kind);
    const created = await http(server, "POST", "/v1/references", {
      body: { container_id: containerNumber("EXAU", ++serial), carrier_code: "MSCU" },
    });
    expectStatus(created, 201);
    referenceId = created.body.reference.id;
  }, 60_000);
  afterAll(async () => {
    await server?.close();
  });

  async function storedUpdates(): Promise<unknown[]> {
    const list = await http(server, "GET", `/v1/references/${referenceId}/updates?limit=500`, {
      headers: { "cache-control": "no-cache" },
    });
    expectStatus(list, 200);
    return list.body.data.map((update: { update: unknown }) => update.update);
  }

  /** Documents (as JSON text) whose numbers a parser cannot keep, and the member each answer must point at. */
  const INEXACT: [string, string][] = [
    [`{"n":1e400}`, "/n"],
    [`{"n":-1E999}`, "/n"],
    [`{"id":9007199254740993}`, "/id"],
    [`{"id":-9007199254740992}`, "/id"],
    [`{"vessel":"X","legs":[1,{"grossWeight":1e20}]}`, "/legs/1/grossWeight"],
    // Non-zero numbers closer to 0 than a double holds: parsed as 0, they would be stored as 0.
    [`{"n":1e-400}`, "/n"],
    [`{"vessel":"X","legs":[0,{"draft":-2.5E-999}]}`, "/legs/1/draft"],
  ];

  it("refuses through REST what JSON numbers cannot keep exactly, with a pointer, and stores nothing", async () => {
    const before = await storedUpdates();
    for (const [document, pointer] of INEXACT) {
      const single = await http(server, "POST", `/v1/references/${referenceId}/updates`, {
        rawBody: document,
        headers: { "content-type": "application/json" },
      });
      expect({ document, status: single.status }).toEqual({ document, status: 422 });
      expect(single.body.code).toBe("VALIDATION_FAILED");
      expect(single.body.errors[0]).toMatchObject({ pointer, code: "INEXACT_NUMBER" });

      const bulk = await http(server, "POST", "/v1/ingestions", {
        rawBody: `{"items":[{"kind":"update","reference_id":"${referenceId}","update":${document}}]}`,
        headers: { "content-type": "application/json" },
      });
      expect({ document, status: bulk.status }).toEqual({ document, status: 422 });
      expect(bulk.body.errors[0]).toMatchObject({ pointer: `/items/0/update${pointer}`, code: "INEXACT_NUMBER" });
    }
    expect(await storedUpdates()).toEqual(before);
  });

  it("refuses the same through GraphQL variables and literals, naming the field", async () => {
    const before = await storedUpdates();
    for (const [document, pointer] of INEXACT) {
      const field = `input.update${pointer.replaceAll("/", ".")}`;
      const variables = await rawGraphql(
        server,
        `{"query":${JSON.stringify(RECORD_UPDATE)},"variables":{"input":{"referenceId":"${referenceId}","update":${document}}}}`,
      );
      expect({ document, errors: variables.body.errors }).toMatchObject({
        document,
        errors: [{ extensions: { code: "VALIDATION_FAILED", field } }],
      });
      expect(variables.body.errors[0].extensions.issues[0]).toMatchObject({ field, code: "INEXACT_NUMBER" });

      // The same document as a GraphQL literal: object keys unquoted, numbers as written.
      const literal = document.replace(/"([A-Za-z]+)":/g, "$1:");
      const inline = `mutation { recordReferenceUpdate(input: { referenceId: "${referenceId}", update: ${literal} }) { update { id } } }`;
      const literalAnswer = await rawGraphql(server, JSON.stringify({ query: inline }));
      expect({ document, errors: literalAnswer.body.errors }).toMatchObject({
        document,
        errors: [{ extensions: { code: "VALIDATION_FAILED", field } }],
      });

      const ingest = await rawGraphql(
        server,
        JSON.stringify({
          query: `mutation { ingest(input: { items: [{ update: { referenceId: "${referenceId}", update: ${literal} } }] }) { succeeded } }`,
        }),
      );
      expect({ document, code: ingest.body.errors?.[0]?.extensions?.code }).toEqual({
        document,
        code: "VALIDATION_FAILED",
      });
    }
    expect(await storedUpdates()).toEqual(before);
  });

  it("refuses through graphql-ws variables a number that underflows, naming the field", async () => {
    const before = await storedUpdates();
    // Raw protocol messages: a client library would serialize the parsed 0, not the text.
    const socket = new WebSocket(graphqlWsUrl(server), "graphql-transport-ws");
    const messages: { type: string; id?: string; payload?: any }[] = [];
    socket.on("message", (data: RawData) => messages.push(JSON.parse(String(data))));
    try {
      await new Promise((resolve, reject) => socket.once("open", resolve).once("error", reject));
      socket.send(JSON.stringify({ type: "connection_init", payload: { "x-api-key": server.apiKey } }));
      await eventually(() => messages.some((message) => message.type === "connection_ack"), 10_000);
      socket.send(
        `{"id":"u1","type":"subscribe","payload":{"query":${JSON.stringify(RECORD_UPDATE)},` +
          `"variables":{"input":{"referenceId":"${referenceId}","update":{"legs":[{"draft":1e-400}]}}}}}`,
      );
      await eventually(() => messages.some((message) => message.id === "u1"), 10_000);
      const answer = messages.find((message) => message.id === "u1")!;
      expect(answer.type).toBe("error");
      expect(answer.payload[0].extensions).toMatchObject({
        code: "VALIDATION_FAILED",
        field: "input.update.legs.0.draft",
        issues: [{ code: "INEXACT_NUMBER" }],
      });
    } finally {
      socket.close();
    }
    expect(await storedUpdates()).toEqual(before);
  });

  it("refuses a number that underflows in any REST body with a pointer, not only in update documents", async () => {
    const created = await http(server, "POST", "/v1/references", {
      rawBody: `{"container_id":"${containerNumber("EXAU", ++serial)}","carrier_code":"MSCU","metadata":{"w":1e-400}}`,
      headers: { "content-type": "application/json" },
    });
    expect(created.status).toBe(422);
    expect(created.body.code).toBe("VALIDATION_FAILED");
    expect(created.body.errors[0]).toMatchObject({ pointer: "/metadata/w", code: "INEXACT_NUMBER" });
  });

  it("stores numbers JSON keeps exactly, as sent, on both surfaces", async () => {
    const document = `{"max":9007199254740991,"min":-9007199254740991,"ratio":0.1,"small":1.5e-300,"tiny":5e-324,"zero":0e-400}`;
    const expected = {
      max: 9007199254740991,
      min: -9007199254740991,
      ratio: 0.1,
      small: 1.5e-300,
      tiny: 5e-324,
      zero: 0,
    };
    const rest = await http(server, "POST", `/v1/references/${referenceId}/updates`, {
      rawBody: document,
      headers: { "content-type": "application/json" },
    });
    expectStatus(rest, 201);
    expect(rest.body.update).toEqual(expected);
    const graphql = await rawGraphql(
      server,
      `{"query":${JSON.stringify(RECORD_UPDATE)},"variables":{"input":{"referenceId":"${referenceId}","update":${document}}}}`,
    );
    expect(graphql.body.errors).toBeUndefined();
    expect(graphql.body.data.recordReferenceUpdate.update.document).toEqual(expected);
    const [latest, previous] = await storedUpdates();
    expect([latest, previous]).toEqual([expected, expected]);
  });

  describe("date-times", () => {
    it("accepts lowercase t and z in an update and normalizes the reference's estimate", async () => {
      const update = await http(server, "POST", `/v1/references/${referenceId}/updates`, {
        body: { estimated_departure: "2026-12-01t08:00:00z", estimated_arrival: "2026-12-20t08:00:00+01:00" },
      });
      expectStatus(update, 201);
      // The document is kept as sent; the reference's estimates are the instants, formatted.
      expect(update.body.update.estimated_departure).toBe("2026-12-01t08:00:00z");
      const reference = await http(server, "GET", `/v1/references/${referenceId}`, {
        headers: { "cache-control": "no-cache" },
      });
      expect(reference.body).toMatchObject({
        estimated_departure: "2026-12-01T08:00:00.000Z",
        estimated_arrival: "2026-12-20T07:00:00.000Z",
      });
      const events = await http(
        server,
        "GET",
        `/v1/references/${referenceId}/events?from=2026-01-01t00:00:00z&to=2100-01-01T00:00:00Z`,
      );
      expectStatus(events, 200);
    });

    it("refuses hour 24 everywhere a date-time is read, with a pointer", async () => {
      const before = await storedUpdates();
      const midnight = "2026-12-01T24:00:00Z";
      const update = await http(server, "POST", `/v1/references/${referenceId}/updates`, {
        body: { estimated_arrival: midnight },
      });
      expect(update.status).toBe(422);
      expect(update.body.errors[0]).toMatchObject({ pointer: "/estimated_arrival", code: "INVALID_DATE_TIME" });

      const bulk = await http(server, "POST", "/v1/ingestions", {
        body: { items: [{ kind: "update", reference_id: referenceId, update: { estimated_departure: midnight } }] },
      });
      expect(bulk.status).toBe(422);
      expect(bulk.body.errors[0].pointer).toBe("/items/0/update/estimated_departure");

      const graphql = await rawGraphql(
        server,
        JSON.stringify({
          query: RECORD_UPDATE,
          variables: { input: { referenceId, update: { estimated_departure: midnight } } },
        }),
      );
      expect(graphql.body.errors[0].extensions).toMatchObject({
        code: "VALIDATION_FAILED",
        field: "input.update.estimated_departure",
      });
      expect(await storedUpdates()).toEqual(before);

      for (const parameter of ["from", "to"]) {
        const events = await http(server, "GET", `/v1/references/${referenceId}/events?${parameter}=${midnight}`);
        expect({ parameter, status: events.status }).toEqual({ parameter, status: 400 });
        expect(events.body.errors[0].pointer).toBe(parameter);
      }
      const eventsQuery = await rawGraphql(
        server,
        JSON.stringify({
          query: `query ($id: ID!, $from: DateTime) { reference(id: $id) { events(filter: { from: $from }) { edges { cursor } } } }`,
          variables: { id: referenceId, from: midnight },
        }),
      );
      expect(eventsQuery.body.errors[0].extensions.code).toBe("BAD_USER_INPUT");

      const endpoint = await http(server, "POST", "/v1/webhooks", { body: { url: "http://127.0.0.1:9/hook" } });
      expectStatus(endpoint, 201);
      for (const [window, pointer] of [
        [{ since: midnight }, "/since"],
        [{ since: "2026-01-01T00:00:00Z", until: midnight }, "/until"],
      ] as const) {
        const recover = await http(server, "POST", `/v1/webhooks/${endpoint.body.id}/recover`, { body: window });
        expect({ window, status: recover.status }).toEqual({ window, status: 422 });
        expect(recover.body.errors[0].pointer).toBe(pointer);
      }
    });
  });
});
