import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { DATABASE_KINDS, ManualClock, startTestServer, type TestServer } from "./support/test-server.ts";

/* The lifecycle log and the tracking side through GraphQL: every event type in one log, with tag snapshots (paging: graphql-lifecycle.test.ts). */

async function gql(server: TestServer, query: string, variables: Record<string, unknown> = {}) {
  const response = await fetch(`${server.url}/graphql`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": server.apiKey },
    body: JSON.stringify({ query, variables }),
  });
  return (await response.json()) as { data?: any; errors?: any[] };
}

async function ok(server: TestServer, query: string, variables: Record<string, unknown> = {}) {
  const result = await gql(server, query, variables);
  expect(result.errors).toBeUndefined();
  return result.data;
}

const EVENTS = `events(first: $first, after: $after, last: $last, before: $before, filter: $filter) {
  edges { cursor node { id type occurredAt referenceId detail referenceTags { id name } } }
  pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
}`;
const EVENTS_QUERY = `query($id: ID!, $first: Int, $after: String, $last: Int, $before: String, $filter: LifecycleEventFilter) {
  reference(id: $id) { ${EVENTS} }
}`;

describe.each(DATABASE_KINDS)("lifecycle log over GraphQL on %s", (kind) => {
  let server: TestServer;
  const clock = new ManualClock(new Date("2026-11-22T12:00:00.000Z"));

  beforeAll(async () => {
    server = await startTestServer(kind, { clock, env: { EXTRACTION_FAILURE_THRESHOLD: "2" } });
  });
  afterAll(async () => server?.close());

  const step = async (query: string, variables: Record<string, unknown>) => {
    clock.advance(1_000);
    return ok(server, query, variables);
  };

  it("records every event type through the mutations, with tag snapshots", async () => {
    const created = await step(
      `mutation($input: CreateReferenceInput!) { createReference(input: $input) { reference { id } } }`,
      { input: { billOfLading: "GQL-BOL-1", carrierCode: "MAEU", tags: [{ name: "gql-log" }] } },
    );
    const id = created.createReference.reference.id;
    await step(
      `mutation($id: ID!) { recordExtraction(input: { referenceId: $id, status: SUCCEEDED }) { reference { id } } }`,
      { id },
    );
    await step(
      `mutation($input: RecordReferenceUpdateInput!) { recordReferenceUpdate(input: $input) { update { id } reference { estimatedArrival } } }`,
      {
        input: {
          referenceId: id,
          update: { estimated_departure: "2026-12-01T00:00:00Z", estimated_arrival: "2026-12-24T00:00:00Z" },
        },
      },
    );
    const children = await step(
      `mutation($id: ID!) { reportChildContainers(input: { referenceId: $id, containerIds: ["CSQU3054383"] }) { children { id parent { id } tags { name } } } }`,
      { id },
    );
    expect(children.reportChildContainers.children[0]).toMatchObject({ parent: { id }, tags: [{ name: "gql-log" }] });
    await step(
      `mutation($id: ID!) { deactivateReference(input: { referenceId: $id, reason: CARRIER_NOT_FOUND }) { reference { active } } }`,
      { id },
    );
    await step(`mutation($id: ID!) { reactivateReference(input: { referenceId: $id }) { reference { active } } }`, {
      id,
    });
    const failures = `mutation($id: ID!) { recordExtraction(input: { referenceId: $id, status: FAILED, error: { code: "E", message: "m" } }) { reference { active deactivateReason autoUnsubscribed } } }`;
    await step(failures, { id });
    const second = await step(failures, { id });
    expect(second.recordExtraction.reference).toEqual({
      active: false,
      deactivateReason: "EXCEEDED_EXTRACTION_ATTEMPT_THRESHOLD",
      autoUnsubscribed: true,
    });

    const log = (await ok(server, EVENTS_QUERY, { id, first: 50 })).reference.events.edges.map(
      (edge: any) => edge.node,
    );
    expect(log.map((event: any) => event.type)).toEqual([
      "REFERENCE_CREATED",
      "EXTRACTION_SUCCEEDED",
      "REFERENCE_UPDATE_CREATED",
      "ESTIMATED_DEPARTURE_CHANGED",
      "ESTIMATED_ARRIVAL_CHANGED",
      "REFERENCE_DEACTIVATED",
      "REFERENCE_REACTIVATED",
      "EXTRACTION_FAILED",
      "EXTRACTION_FAILED",
      "REFERENCE_DEACTIVATED",
    ]);
    for (const event of log) {
      expect(event.referenceId).toBe(id);
      expect(event.detail).toMatchObject({ reference_id: id, organization_id: server.organizationId });
      expect(event.referenceTags).toEqual([{ id: expect.any(String), name: "gql-log" }]);
    }
    expect(log[3].detail).toMatchObject({ previous: null, current: "2026-12-01T00:00:00.000Z" });
    expect(log[8].detail).toMatchObject({
      status: "failed",
      consecutive_failures: 2,
      error: { code: "E", message: "m" },
    });
    expect(log[9].detail).toMatchObject({
      deactivate_reason: "exceeded_extraction_attempt_threshold",
      auto_unsubscribed: true,
    });

    const reactivateActive = await gql(
      server,
      `mutation($id: ID!) { reactivateReference(input: { referenceId: $id }) { reference { id } } }`,
      {
        id: children.reportChildContainers.children[0].id,
      },
    );
    expect(reactivateActive.errors?.[0]?.extensions?.code).toBe("CONFLICT");
  });
});
