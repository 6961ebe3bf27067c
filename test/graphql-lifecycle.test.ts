import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gql, gqlData } from "./support/graphql-client.ts";
import { DATABASE_KINDS, ManualClock, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * The tracking-side mutations and Reference.events as a Relay connection: forward and
 * backward pages, filters, and what each mutation returns.
 */

const EVENTS = `
  query ($id: ID!, $first: Int, $after: String, $last: Int, $before: String, $filter: LifecycleEventFilter) {
    reference(id: $id) {
      events(first: $first, after: $after, last: $last, before: $before, filter: $filter) {
        edges { cursor node { id type occurredAt referenceId detail referenceTags { id name } } }
        pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
      }
    }
  }`;

interface EventsPage {
  edges: { cursor: string; node: { id: string; type: string; occurredAt: string; detail: Record<string, unknown> } }[];
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
}

describe.each(DATABASE_KINDS)("GraphQL lifecycle on %s", (kind) => {
  let server: TestServer;
  const clock = new ManualClock(new Date("2026-11-22T02:49:01.665Z"));
  let referenceId: string;

  async function events(variables: Record<string, unknown>): Promise<EventsPage> {
    const data = await gqlData(server, EVENTS, { id: referenceId, ...variables });
    return data.reference.events;
  }

  beforeAll(async () => {
    server = await startTestServer(kind, { clock });
    const created = await gqlData(
      server,
      `mutation { createReference(input: { bookingNumber: "bk-42", carrierCode: "cmdu", tags: [{ name: "Reefer" }] }) { reference { id bookingNumber carrierCode active createdAt } } }`,
    );
    expect(created.createReference.reference).toMatchObject({
      bookingNumber: "BK-42",
      carrierCode: "CMDU",
      active: true,
      createdAt: "2026-11-22T02:49:01.665Z",
    });
    referenceId = created.createReference.reference.id;
  }, 60_000);

  afterAll(async () => {
    await server?.close();
  });

  it("records extractions, updates, deactivation and reactivation, returning the changed reference", async () => {
    clock.advance(1_000);
    const failed = await gqlData(
      server,
      `mutation ($id: ID!) { recordExtraction(input: { referenceId: $id, status: FAILED, error: { code: "TIMEOUT", message: "carrier slow" } }) { reference { lastUpdateStatus consecutiveFailures active } } }`,
      { id: referenceId },
    );
    expect(failed.recordExtraction.reference).toEqual({
      lastUpdateStatus: "FAILED",
      consecutiveFailures: 1,
      active: true,
    });

    clock.advance(1_000);
    const updated = await gqlData(
      server,
      `mutation ($input: RecordReferenceUpdateInput!) { recordReferenceUpdate(input: $input) { update { id referenceId document createdAt } reference { estimatedArrival estimatedDeparture } } }`,
      { input: { referenceId, update: { estimated_arrival: "2026-12-01T10:00:00+02:00", vessel: "EVER GIVEN" } } },
    );
    expect(updated.recordReferenceUpdate.update).toMatchObject({
      referenceId,
      document: { estimated_arrival: "2026-12-01T10:00:00+02:00", vessel: "EVER GIVEN" },
      createdAt: "2026-11-22T02:49:03.665Z",
    });
    expect(updated.recordReferenceUpdate.reference).toEqual({
      estimatedArrival: "2026-12-01T08:00:00.000Z",
      estimatedDeparture: null,
    });

    clock.advance(1_000);
    const deactivated = await gqlData(
      server,
      `mutation ($id: ID!) { deactivateReference(input: { referenceId: $id, reason: DATA_NOT_FOUND }) { reference { active deactivateReason autoUnsubscribed } } }`,
      { id: referenceId },
    );
    expect(deactivated.deactivateReference.reference).toEqual({
      active: false,
      deactivateReason: "DATA_NOT_FOUND",
      autoUnsubscribed: false,
    });

    clock.advance(1_000);
    const reactivated = await gqlData(
      server,
      `mutation ($id: ID!) { reactivateReference(input: { referenceId: $id }) { reference { active deactivateReason consecutiveFailures } } }`,
      { id: referenceId },
    );
    expect(reactivated.reactivateReference.reference).toEqual({
      active: true,
      deactivateReason: null,
      consecutiveFailures: 0,
    });

    const updates = await gqlData(
      server,
      `query ($id: ID!) { reference(id: $id) { updates { edges { node { id } } pageInfo { hasNextPage } } } }`,
      { id: referenceId },
    );
    expect(updates.reference.updates.edges).toHaveLength(1);
  });

  it("pages the log forward with first/after, in (occurredAt, id) order", async () => {
    const all = await events({});
    expect(all.edges.map((edge) => edge.node.type)).toEqual([
      "REFERENCE_CREATED",
      "EXTRACTION_FAILED",
      "REFERENCE_UPDATE_CREATED",
      "ESTIMATED_ARRIVAL_CHANGED",
      "REFERENCE_DEACTIVATED",
      "REFERENCE_REACTIVATED",
    ]);
    expect(all.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: false });
    expect(all.edges[0]!.node.detail).toMatchObject({
      identifier_type: "booking_number",
      identifier_value: "BK-42",
      carrier_scac: "CMDU",
    });
    expect(all.edges[0]!.node.occurredAt).toBe("2026-11-22T02:49:01.665Z");

    const first = await events({ first: 4 });
    expect(first.edges.map((edge) => edge.node.id)).toEqual(all.edges.slice(0, 4).map((edge) => edge.node.id));
    expect(first.pageInfo).toMatchObject({
      hasNextPage: true,
      hasPreviousPage: false,
      startCursor: first.edges[0]!.cursor,
      endCursor: first.edges[3]!.cursor,
    });
    const second = await events({ first: 4, after: first.pageInfo.endCursor });
    expect(second.edges.map((edge) => edge.node.id)).toEqual(all.edges.slice(4).map((edge) => edge.node.id));
    expect(second.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
  });

  it("pages the log backward from the newest event with last/before", async () => {
    const all = (await events({})).edges.map((edge) => edge.node.id);
    const newest = await events({ last: 4 });
    expect(newest.edges.map((edge) => edge.node.id)).toEqual(all.slice(2));
    expect(newest.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: true });
    const older = await events({ last: 4, before: newest.pageInfo.startCursor });
    expect(older.edges.map((edge) => edge.node.id)).toEqual(all.slice(0, 2));
    expect(older.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
  });

  it("filters by type and time range, and binds cursors to their filter", async () => {
    const failures = await events({ filter: { types: ["EXTRACTION_FAILED", "REFERENCE_CREATED"] } });
    expect(failures.edges.map((edge) => edge.node.type)).toEqual(["REFERENCE_CREATED", "EXTRACTION_FAILED"]);
    expect(failures.edges[1]!.node.detail).toMatchObject({
      status: "failed",
      error: { code: "TIMEOUT", message: "carrier slow" },
      consecutive_failures: 1,
    });

    const window = await events({ filter: { from: "2026-11-22T03:49:02.665+01:00", to: "2026-11-22T02:49:03.665Z" } });
    expect(window.edges.map((edge) => edge.node.type)).toEqual([
      "EXTRACTION_FAILED",
      "REFERENCE_UPDATE_CREATED",
      "ESTIMATED_ARRIVAL_CHANGED",
    ]);

    const page = await events({ first: 1 });
    const { body } = await gql(server, EVENTS, {
      id: referenceId,
      first: 1,
      after: page.pageInfo.endCursor,
      filter: { types: ["REFERENCE_CREATED"] },
    });
    expect(body.errors?.[0]?.extensions).toMatchObject({ code: "CURSOR_FILTER_MISMATCH", field: "after" });
  });

  it("refuses both directions at once", async () => {
    const { body } = await gql(server, EVENTS, { id: referenceId, first: 2, last: 2 });
    expect(body.errors?.[0]?.extensions).toMatchObject({ code: "BAD_USER_INPUT", field: "last" });
  });

  it("deactivates a reference itself after too many failed extractions", async () => {
    const created = await gqlData(
      server,
      `mutation { createReference(input: { billOfLading: "BL-FAIL", carrierCode: "MAEU" }) { reference { id } } }`,
    );
    const id = created.createReference.reference.id;
    let last:
      | { active: boolean; deactivateReason: string | null; autoUnsubscribed: boolean; consecutiveFailures: number }
      | undefined;
    for (let attempt = 0; attempt < server.config.extractionFailureThreshold; attempt++) {
      const data = await gqlData(
        server,
        `mutation ($id: ID!) { recordExtraction(input: { referenceId: $id, status: FAILED, error: { code: "E", message: "m" } }) { reference { active deactivateReason autoUnsubscribed consecutiveFailures } } }`,
        { id },
      );
      last = data.recordExtraction.reference;
    }
    expect(last).toEqual({
      active: false,
      deactivateReason: "EXCEEDED_EXTRACTION_ATTEMPT_THRESHOLD",
      autoUnsubscribed: true,
      consecutiveFailures: server.config.extractionFailureThreshold,
    });
  });

  it("shows each mutation's own result when one operation changes the same reference twice", async () => {
    const created = await gqlData(
      server,
      `mutation { createReference(input: { billOfLading: "BL-TWICE", carrierCode: "MAEU" }) { reference { id tags { name } } } }`,
    );
    const id = created.createReference.reference.id;
    const data = await gqlData(
      server,
      `mutation ($id: ID!) {
        added: addTagsToReference(input: { referenceId: $id, tags: [{ name: "a" }, { name: "b" }] }) { reference { tags { id name } } }
        tagged: addTagsToReference(input: { referenceId: $id, tags: [{ name: "c" }] }) { reference { tags { name } } }
      }`,
      { id },
    );
    expect(data.added.reference.tags.map((tag: { name: string }) => tag.name)).toEqual(["a", "b"]);
    expect(data.tagged.reference.tags.map((tag: { name: string }) => tag.name)).toEqual(["a", "b", "c"]);

    const tagA = data.added.reference.tags[0].id;
    const removed = await gqlData(
      server,
      `mutation ($id: ID!, $tagId: ID!) {
        before: reportChildContainers(input: { referenceId: $id, containerIds: ["CSQU3054383"] }) { children { tags { name } parent { tags { name } } } }
        removeTagFromReference(input: { referenceId: $id, tagId: $tagId }) { reference { tags { name } children { tags { name } } } }
      }`,
      { id, tagId: tagA },
    );
    expect(removed.before.children[0].tags.map((tag: { name: string }) => tag.name)).toEqual(["a", "b", "c"]);
    // Removing the tag from the parent leaves the child's copy alone.
    expect(removed.removeTagFromReference.reference.tags.map((tag: { name: string }) => tag.name)).toEqual(["b", "c"]);
    expect(removed.removeTagFromReference.reference.children[0].tags.map((tag: { name: string }) => tag.name)).toEqual([
      "a",
      "b",
      "c",
    ]);
  });
});
