import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gql } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { subscribe, waitForOpenSubscriptions } from "./support/subscription-client.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { createEndpoint, createReference, listDeliveries } from "./support/webhooks.ts";
import { withLabel } from "./support/with-label.ts";

/*
 * Bulk ingestion (issue 8): one request carrying many reports of the tracking side, on both surfaces and both
 * databases. Atomic requests save everything or nothing; per-item requests save the good items and say why the
 * others were refused; the same rules as the single-item paths apply (failure counts, automatic deactivation,
 * estimate change events), and concurrent writers on the same references lose nothing.
 */

const THRESHOLD = 3;

type Server = Pick<TestServer, "url" | "apiKey">;

async function eventsOf(server: Server, referenceId: string): Promise<any[]> {
  const page = await http(server, "GET", `/v1/references/${referenceId}/events?limit=500`);
  expectStatus(page, 200);
  return page.body.data;
}

async function updatesOf(server: Server, referenceId: string): Promise<any[]> {
  const page = await http(server, "GET", `/v1/references/${referenceId}/updates?limit=500`);
  expectStatus(page, 200);
  return page.body.data;
}

async function referenceOf(server: Server, referenceId: string): Promise<any> {
  const result = await http(server, "GET", `/v1/references/${referenceId}`);
  expectStatus(result, 200);
  return result.body;
}

/** Every event and update of the references, to compare before and after a refused request. */
async function snapshotOf(server: Server, referenceIds: readonly string[]) {
  return Promise.all(
    referenceIds.map(async (id) => ({
      events: (await eventsOf(server, id)).length,
      updates: (await updatesOf(server, id)).length,
      reference: await referenceOf(server, id),
    })),
  );
}

const failed = (referenceId: string, code = "TIMEOUT") => ({
  kind: "extraction",
  reference_id: referenceId,
  status: "failed",
  error: { code, message: "the carrier did not answer" },
});
const succeeded = (referenceId: string) => ({ kind: "extraction", reference_id: referenceId, status: "succeeded" });

describe.each(DATABASE_KINDS)("bulk ingestion over REST on %s", (kind) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(kind, {
      env: { EXTRACTION_FAILURE_THRESHOLD: String(THRESHOLD), WEBHOOK_WORKER: "off" },
    });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("saves a mixed atomic batch over many references, with its events in order, outbox rows and live messages", async () => {
    const tagged = await Promise.all(
      Array.from({ length: 5 }, () => createReference(server, { tags: [{ name: "priority" }] })),
    );
    const plain = await Promise.all(Array.from({ length: 5 }, () => createReference(server)));
    const priority = tagged[0].tags[0].id as string;
    const everything = await createEndpoint(server, { url: "http://127.0.0.1:9/all" });
    const onlyPriority = await createEndpoint(server, { url: "http://127.0.0.1:9/priority", tag_ids: [priority] });
    const live = subscribe(
      server,
      `subscription { lifecycleEvents(types: [EXTRACTION_SUCCEEDED, EXTRACTION_FAILED, REFERENCE_UPDATE_CREATED, ESTIMATED_ARRIVAL_CHANGED, ESTIMATED_DEPARTURE_CHANGED, REFERENCE_DEACTIVATED, REFERENCE_REACTIVATED]) { node { id type referenceId } } }`,
    );
    await waitForOpenSubscriptions(server, 1);

    const references = [...tagged, ...plain];
    // Per reference: a failure, an update that sets both estimates, a deactivation and a reactivation.
    const items = references.flatMap((reference) => [
      failed(reference.id),
      {
        kind: "update",
        reference_id: reference.id,
        update: {
          estimated_departure: "2026-12-01T08:00:00Z",
          estimated_arrival: "2026-12-20T08:00:00+01:00",
          vessel: "X",
        },
      },
      { kind: "deactivate", reference_id: reference.id, reason: "data_not_found" },
      { kind: "reactivate", reference_id: reference.id },
      succeeded(reference.id),
    ]);
    const result = await http(server, "POST", "/v1/ingestions", { body: { items } });
    expectStatus(result, 201);
    expect(result.body).toMatchObject({ mode: "atomic", succeeded: items.length, failed: 0 });
    // failed 1 + update 3 (created, departure, arrival) + deactivated 1 + reactivated 1 + succeeded 1.
    expect(result.body.event_count).toBe(references.length * 7);
    expect(result.body.items).toHaveLength(items.length);
    expect(result.body.items[1]).toMatchObject({
      index: 1,
      ok: true,
      reference_id: references[0].id,
      error: null,
      update: { reference_id: references[0].id, update: { vessel: "X" } },
    });
    expect(result.body.items[1].events.map((event: any) => event.type)).toEqual([
      "reference_update_created",
      "estimated_departure_changed",
      "estimated_arrival_changed",
    ]);

    for (const reference of references) {
      const log = await eventsOf(server, reference.id);
      withLabel(reference.id, () =>
        expect(log.map((event) => event.type)).toEqual([
          "reference_created",
          "extraction_failed",
          "reference_update_created",
          "estimated_departure_changed",
          "estimated_arrival_changed",
          "reference_deactivated",
          "reference_reactivated",
          "extraction_succeeded",
        ]),
      );
      withLabel(reference.id, () =>
        expect(log[4].detail).toMatchObject({ previous: null, current: "2026-12-20T07:00:00.000Z" }),
      );
      const after = await referenceOf(server, reference.id);
      withLabel(reference.id, () =>
        expect(after).toMatchObject({
          active: true,
          deactivate_reason: null,
          consecutive_failures: 0,
          last_update_status: "succeeded",
          estimated_departure: "2026-12-01T08:00:00.000Z",
          estimated_arrival: "2026-12-20T07:00:00.000Z",
        }),
      );
      const updates = await updatesOf(server, reference.id);
      withLabel(reference.id, () => expect(updates).toHaveLength(1));
    }

    // The outbox: every event for the endpoint without a filter, only the tagged references' for the other.
    const all = await listDeliveries(server, everything.id, "?limit=500");
    expect(all).toHaveLength(references.length * 7);
    const routed = await listDeliveries(server, onlyPriority.id, "?limit=500");
    expect(routed).toHaveLength(tagged.length * 7);
    const taggedIds = new Set(tagged.map((reference) => reference.id));
    expect(routed.every((delivery: any) => taggedIds.has(delivery.body.reference_id))).toBe(true);

    // Committed events reach live subscriptions like any other unit of work's.
    await live.waitFor(references.length * 7, 15_000);
    const ids = new Set(result.body.items.flatMap((item: any) => item.events.map((event: any) => event.id)));
    expect(new Set(live.data.map((message: any) => message.lifecycleEvents.node.id))).toEqual(ids);
    await live.dispose();
  });

  it("rejects a whole atomic batch for one bad item, with a pointer to it, and saves nothing", async () => {
    const references = await Promise.all(Array.from({ length: 4 }, () => createReference(server)));
    const valid = Array.from({ length: 20 }, (_, index) => succeeded(references[index % 4].id));
    const before = await snapshotOf(
      server,
      references.map((reference) => reference.id),
    );

    const cases: { name: string; item: unknown; status: number; code: string; pointer: string; issue: string }[] = [
      {
        name: "a blank error code",
        item: { ...failed(references[1].id), error: { code: " ", message: "m" } },
        status: 422,
        code: "VALIDATION_FAILED",
        pointer: "/items/17/error/code",
        issue: "REQUIRED",
      },
      {
        name: "an unknown reference",
        item: succeeded("01900000-0000-7000-8000-000000000000"),
        status: 404,
        code: "NOT_FOUND",
        pointer: "/items/17/reference_id",
        issue: "NOT_FOUND",
      },
      {
        name: "a malformed reference id",
        item: succeeded("not-an-id"),
        status: 404,
        code: "NOT_FOUND",
        pointer: "/items/17/reference_id",
        issue: "NOT_FOUND",
      },
      {
        name: "reactivating an active reference",
        item: { kind: "reactivate", reference_id: references[2].id },
        status: 409,
        code: "CONFLICT",
        pointer: "/items/17",
        issue: "CONFLICT",
      },
      {
        name: "an estimate that is not a date-time",
        item: { kind: "update", reference_id: references[0].id, update: { estimated_arrival: "soon" } },
        status: 422,
        code: "VALIDATION_FAILED",
        pointer: "/items/17/update/estimated_arrival",
        issue: "INVALID_DATE_TIME",
      },
      {
        name: "a field another kind takes",
        item: { kind: "reactivate", reference_id: references[0].id, reason: "data_not_found" },
        status: 422,
        code: "VALIDATION_FAILED",
        pointer: "/items/17/reason",
        issue: "NOT_ALLOWED",
      },
      {
        name: "an unknown deactivation reason (the single-item route's schema)",
        item: { kind: "deactivate", reference_id: references[0].id, reason: "bored" },
        status: 422,
        code: "VALIDATION_FAILED",
        pointer: "/items/17/reason",
        issue: "ENUM",
      },
    ];
    for (const { name, item, status, code, pointer, issue } of cases) {
      const items = [...valid.slice(0, 17), item, ...valid.slice(17)];
      const result = await http(server, "POST", "/v1/ingestions", { body: { items } });
      withLabel(name, () => expectStatus(result, status));
      withLabel(name, () => expect(result.body.code).toBe(code));
      withLabel(name, () => expect(result.body.errors).toEqual([expect.objectContaining({ pointer, code: issue })]));
    }
    expect(
      await snapshotOf(
        server,
        references.map((reference) => reference.id),
      ),
    ).toEqual(before);
  });

  it("gives the single-item routes' codes for the same bad input", async () => {
    const reference = await createReference(server);
    const single = await http(server, "POST", `/v1/references/${reference.id}/extractions`, {
      body: { status: "failed", error: { code: "", message: "m" } },
    });
    const bulk = await http(server, "POST", "/v1/ingestions", {
      body: {
        items: [
          { kind: "extraction", reference_id: reference.id, status: "failed", error: { code: "", message: "m" } },
        ],
      },
    });
    expectStatus(single, 422);
    expectStatus(bulk, 422);
    expect(bulk.body.errors.map((issue: any) => issue.code)).toEqual(
      single.body.errors.map((issue: any) => issue.code),
    );
    expect(bulk.body.errors[0].pointer).toBe(`/items/0${single.body.errors[0].pointer}`);

    const singleConflict = await http(server, "POST", `/v1/references/${reference.id}/reactivate`);
    const bulkConflict = await http(server, "POST", "/v1/ingestions", {
      body: { items: [{ kind: "reactivate", reference_id: reference.id }] },
    });
    expect([bulkConflict.status, bulkConflict.body.code]).toEqual([singleConflict.status, singleConflict.body.code]);
  });

  it("judges each item on its own in per_item mode and saves the valid ones", async () => {
    const [first, second] = await Promise.all([createReference(server), createReference(server)]);
    const items = [
      failed(first.id),
      { kind: "reactivate", reference_id: first.id },
      { ...failed(second.id), error: { code: "X" } },
      succeeded("01900000-0000-7000-8000-000000000000"),
      { kind: "deactivate", reference_id: second.id, reason: "carrier_not_found" },
      { kind: "reactivate", reference_id: second.id },
      { kind: "update", reference_id: first.id, update: { estimated_arrival: "tomorrow" } },
      { kind: "update", reference_id: first.id, update: { note: "kept" } },
    ];
    const result = await http(server, "POST", "/v1/ingestions", { body: { mode: "per_item", items } });
    expectStatus(result, 200);
    expect(result.body).toMatchObject({ mode: "per_item", succeeded: 4, failed: 4, event_count: 4 });
    const summary = result.body.items.map((item: any) => [item.index, item.ok, item.error?.code ?? null]);
    expect(summary).toEqual([
      [0, true, null],
      [1, false, "CONFLICT"],
      [2, false, "VALIDATION_FAILED"],
      [3, false, "NOT_FOUND"],
      [4, true, null],
      [5, true, null],
      [6, false, "VALIDATION_FAILED"],
      [7, true, null],
    ]);
    expect(result.body.items[1].error).toMatchObject({
      status: 409,
      errors: [{ pointer: "/items/1", code: "CONFLICT" }],
    });
    expect(result.body.items[2].error.errors).toEqual([
      expect.objectContaining({ pointer: "/items/2/error/message", code: "REQUIRED" }),
    ]);
    expect(result.body.items[3].error).toMatchObject({ status: 404, errors: [{ pointer: "/items/3/reference_id" }] });
    expect(result.body.items[6].error.errors[0].pointer).toBe("/items/6/update/estimated_arrival");
    expect(result.body.items[3].events).toEqual([]);

    expect((await eventsOf(server, first.id)).map((event) => event.type)).toEqual([
      "reference_created",
      "extraction_failed",
      "reference_update_created",
    ]);
    expect((await eventsOf(server, second.id)).map((event) => event.type)).toEqual([
      "reference_created",
      "reference_deactivated",
      "reference_reactivated",
    ]);
    expect(await updatesOf(server, first.id)).toEqual([result.body.items[7].update]);
  });

  it("refuses more than 500 items with LIMIT_EXCEEDED and an empty list as invalid, before any work", async () => {
    const reference = await createReference(server);
    const tooMany = await http(server, "POST", "/v1/ingestions", {
      body: { items: Array.from({ length: 501 }, () => succeeded(reference.id)) },
    });
    expectStatus(tooMany, 422);
    expect(tooMany.body).toMatchObject({ code: "LIMIT_EXCEEDED", limit: 500 });
    expect(tooMany.body.errors).toEqual([expect.objectContaining({ pointer: "/items", code: "LIMIT_EXCEEDED" })]);
    const empty = await http(server, "POST", "/v1/ingestions", { body: { items: [] } });
    expectStatus(empty, 422);
    expect(empty.body.errors).toEqual([expect.objectContaining({ pointer: "/items", code: "REQUIRED" })]);
    const badMode = await http(server, "POST", "/v1/ingestions", { body: { mode: "sometimes", items: [] } });
    expectStatus(badMode, 422);
    expect(await eventsOf(server, reference.id)).toHaveLength(1);
    // 500 is allowed.
    const full = await http(server, "POST", "/v1/ingestions", {
      body: { items: Array.from({ length: 500 }, () => succeeded(reference.id)) },
    });
    expectStatus(full, 201);
    expect(full.body.event_count).toBe(500);
    expect(await referenceOf(server, reference.id)).toMatchObject({ last_update_status: "succeeded" });
  });

  it("deactivates automatically when the failure threshold is crossed inside one batch", async () => {
    const reference = await createReference(server);
    const items = Array.from({ length: THRESHOLD + 2 }, () => failed(reference.id));
    const result = await http(server, "POST", "/v1/ingestions", { body: { items } });
    expectStatus(result, 201);
    const types = (await eventsOf(server, reference.id)).map((event) => event.type);
    expect(types).toEqual([
      "reference_created",
      ...Array.from({ length: THRESHOLD }, () => "extraction_failed"),
      "reference_deactivated",
      "extraction_failed",
      "extraction_failed",
    ]);
    const log = await eventsOf(server, reference.id);
    expect(log[THRESHOLD + 1].detail).toMatchObject({
      deactivate_reason: "exceeded_extraction_attempt_threshold",
      auto_unsubscribed: true,
    });
    expect(await referenceOf(server, reference.id)).toMatchObject({
      active: false,
      auto_unsubscribed: true,
      consecutive_failures: THRESHOLD + 2,
    });
    expect(result.body.items[THRESHOLD - 1].events.map((event: any) => event.type)).toEqual([
      "extraction_failed",
      "reference_deactivated",
    ]);
  });
});

const INGEST = `mutation ($input: IngestInput!) {
  ingest(input: $input) {
    mode succeeded failed eventCount
    results {
      index ok referenceId reference { id active consecutiveFailures }
      events { id type referenceId detail }
      update { id document }
      error { code message field }
    }
  }
}`;

describe.each(DATABASE_KINDS)("bulk ingestion over GraphQL on %s", (kind) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(kind, {
      env: { EXTRACTION_FAILURE_THRESHOLD: String(THRESHOLD), WEBHOOK_WORKER: "off" },
    });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("saves an atomic batch of every kind, the threshold crossed inside it", async () => {
    const [first, second] = await Promise.all([createReference(server), createReference(server)]);
    const failure = { referenceId: first.id, status: "FAILED", error: { code: "TIMEOUT", message: "slow" } };
    const items = [
      ...Array.from({ length: THRESHOLD }, () => ({ extraction: failure })),
      { reactivate: { referenceId: first.id } },
      { update: { referenceId: second.id, update: { estimated_arrival: "2026-12-24T18:00:00Z" } } },
      { deactivate: { referenceId: second.id, reason: "INFERRED_SHIPMENT_COMPLETION" } },
      { extraction: { referenceId: second.id, status: "SUCCEEDED" } },
    ];
    const result = await gql(server, INGEST, { input: { items } });
    expect(result.body.errors).toBeUndefined();
    const payload = result.body.data.ingest;
    expect(payload).toMatchObject({ mode: "ATOMIC", succeeded: items.length, failed: 0, eventCount: 9 });
    expect(payload.results[THRESHOLD - 1].events.map((event: any) => event.type)).toEqual([
      "EXTRACTION_FAILED",
      "REFERENCE_DEACTIVATED",
    ]);
    expect(payload.results[THRESHOLD].reference).toEqual({ id: first.id, active: true, consecutiveFailures: 0 });
    expect(payload.results[THRESHOLD + 1].update.document).toEqual({ estimated_arrival: "2026-12-24T18:00:00Z" });
    expect(payload.results[THRESHOLD + 1].events.map((event: any) => event.type)).toEqual([
      "REFERENCE_UPDATE_CREATED",
      "ESTIMATED_ARRIVAL_CHANGED",
    ]);
    expect((await eventsOf(server, second.id)).map((event) => event.type)).toEqual([
      "reference_created",
      "reference_update_created",
      "estimated_arrival_changed",
      "reference_deactivated",
      "extraction_succeeded",
    ]);
  });

  it("rejects an atomic batch with extensions.field naming the item, and saves nothing", async () => {
    const reference = await createReference(server);
    const ok = { extraction: { referenceId: reference.id, status: "SUCCEEDED" } };
    const cases = [
      {
        item: { extraction: { referenceId: reference.id, status: "FAILED", error: { code: "", message: "m" } } },
        code: "VALIDATION_FAILED",
        field: "input.items.2.extraction.error.code",
      },
      {
        item: { reactivate: { referenceId: reference.id } },
        code: "CONFLICT",
        field: "input.items.2.reactivate",
      },
      {
        item: { deactivate: { referenceId: "01900000-0000-7000-8000-000000000000", reason: "DATA_NOT_FOUND" } },
        code: "NOT_FOUND",
        field: "input.items.2.deactivate.referenceId",
      },
      {
        item: { update: { referenceId: reference.id, update: { estimated_departure: 5 } } },
        code: "VALIDATION_FAILED",
        field: "input.items.2.update.update.estimated_departure",
      },
    ];
    for (const { item, code, field } of cases) {
      const result = await gql(server, INGEST, { input: { items: [ok, ok, item, ok] } });
      withLabel(field, () => expect(result.body.errors?.[0]?.extensions).toMatchObject({ code, field }));
    }
    expect(await eventsOf(server, reference.id)).toHaveLength(1);

    // The same bad outcome gets the same code from the single-item mutation.
    const single = await gql(
      server,
      `mutation { recordExtraction(input: { referenceId: "${reference.id}", status: FAILED, error: { code: "", message: "m" } }) { reference { id } } }`,
    );
    expect(single.body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED", field: "input.error.code" });

    const tooMany = await gql(server, INGEST, { input: { items: Array.from({ length: 501 }, () => ok) } });
    expect(tooMany.body.errors?.[0]?.extensions).toMatchObject({
      code: "LIMIT_EXCEEDED",
      field: "input.items",
      limit: 500,
    });
    const empty = await gql(server, INGEST, { input: { items: [] } });
    expect(empty.body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED", field: "input.items" });
    // Two kinds in one item is not a @oneOf input: a GraphQL input error for the whole request.
    const twoKinds = await gql(server, INGEST, {
      input: { items: [{ ...ok, reactivate: { referenceId: reference.id } }] },
    });
    expect(twoKinds.body.errors?.[0]?.extensions?.code).toBe("BAD_USER_INPUT");
    expect(await eventsOf(server, reference.id)).toHaveLength(1);
  });

  it("answers a result per item in PER_ITEM mode", async () => {
    const reference = await createReference(server);
    const result = await gql(server, INGEST, {
      input: {
        mode: "PER_ITEM",
        items: [
          { reactivate: { referenceId: reference.id } },
          { extraction: { referenceId: reference.id, status: "SUCCEEDED" } },
          { extraction: { referenceId: "nope", status: "SUCCEEDED" } },
        ],
      },
    });
    expect(result.body.errors).toBeUndefined();
    const payload = result.body.data.ingest;
    expect(payload).toMatchObject({ mode: "PER_ITEM", succeeded: 1, failed: 2, eventCount: 1 });
    expect(payload.results.map((item: any) => [item.ok, item.error?.code ?? null, item.error?.field ?? null])).toEqual([
      [false, "CONFLICT", "input.items.0.reactivate"],
      [true, null, null],
      [false, "NOT_FOUND", "input.items.2.extraction.referenceId"],
    ]);
    expect(payload.results[2]).toMatchObject({ referenceId: "nope", reference: null, events: [] });
    expect((await eventsOf(server, reference.id)).map((event) => event.type)).toEqual([
      "reference_created",
      "extraction_succeeded",
    ]);
  });
});

describe.each(DATABASE_KINDS)("bulk ingestion under concurrency on %s", (kind) => {
  let server: TestServer;
  beforeAll(async () => {
    // No automatic deactivation here: every failure must be counted, one by one.
    server = await startTestServer(kind, { env: { EXTRACTION_FAILURE_THRESHOLD: "100000", WEBHOOK_WORKER: "off" } });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("counts every failure exactly when bulk requests and single-item writes race on the same references", async () => {
    const references = await Promise.all(Array.from({ length: 12 }, () => createReference(server)));
    const ids = references.map((reference) => reference.id as string);
    // Each bulk request names the references in its own order (reversed, rotated) so that only the store's
    // id order keeps two of them from waiting on each other in a cycle.
    const bulkRequests = Array.from({ length: 8 }, (_, request) => {
      const order = request % 2 === 0 ? [...ids].reverse() : [...ids.slice(request), ...ids.slice(0, request)];
      return http(server, "POST", "/v1/ingestions", {
        body: { items: order.flatMap((id) => [failed(id), failed(id)]) },
      });
    });
    const singleWrites = Array.from({ length: 24 }, (_, index) =>
      http(server, "POST", `/v1/references/${ids[index % ids.length]}/extractions`, {
        body: { status: "failed", error: { code: "X", message: "y" } },
      }),
    );
    const results = await Promise.all([...bulkRequests, ...singleWrites]);
    results.slice(0, 8).forEach((result, index) => withLabel(`bulk ${index}`, () => expectStatus(result, 201)));
    results.slice(8).forEach((result, index) => withLabel(`single ${index}`, () => expectStatus(result, 201)));

    // Per reference: 8 requests × 2 failures + 2 single writes.
    const expected = 8 * 2 + 2;
    for (const id of ids) {
      const log = await eventsOf(server, id);
      const failures = log.filter((event) => event.type === "extraction_failed");
      withLabel(id, () => expect(failures).toHaveLength(expected));
      // Counted one by one: the counts are 1..n, each exactly once.
      withLabel(id, () =>
        expect(
          failures.map((event) => event.detail.consecutive_failures).sort((a: number, b: number) => a - b),
        ).toEqual(Array.from({ length: expected }, (_, index) => index + 1)),
      );
      const reference = await referenceOf(server, id);
      withLabel(id, () => expect(reference.consecutive_failures).toBe(expected));
    }
  });
});
