import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, ManualClock, startTestServer, type TestServer } from "./support/test-server.ts";

/* The lifecycle log and the tracking side through the REST shim: every event type, the tracking-side operations, the events query. */

const CONTAINERS = ["CSQU3054383", "MSKU0000080", "MSKU9070323"];

describe.each(DATABASE_KINDS)("lifecycle log over REST on %s", (kind) => {
  let server: TestServer;
  const clock = new ManualClock(new Date("2026-11-22T10:00:00.000Z"));
  const tick = () => clock.advance(1_000);

  beforeAll(async () => {
    server = await startTestServer(kind, { clock, env: { EXTRACTION_FAILURE_THRESHOLD: "3" } });
  });
  afterAll(async () => server?.close());

  async function createReference(body: Record<string, unknown>) {
    tick();
    const result = await http(server, "POST", "/v1/references", { body });
    expect(result.status).toBe(201);
    return result.body.reference;
  }

  async function events(referenceId: string, query = "") {
    const result = await http(server, "GET", `/v1/references/${referenceId}/events${query}`);
    expectStatus(result, 200);
    return result.body as { data: any[]; next_cursor: string | null };
  }

  it("writes every event type with the detail docs/contract.md lists", async () => {
    const reference = await createReference({
      container_id: CONTAINERS[0],
      carrier_code: "MAEU",
      tags: [{ name: "log" }],
    });
    const base = { reference_id: reference.id, organization_id: server.organizationId };

    tick();
    expect(
      (await http(server, "POST", `/v1/references/${reference.id}/extractions`, { body: { status: "succeeded" } }))
        .status,
    ).toBe(201);
    tick();
    const failed = await http(server, "POST", `/v1/references/${reference.id}/extractions`, {
      body: { status: "failed", error: { code: "TIMEOUT", message: "carrier did not answer" } },
    });
    expect(failed.status).toBe(201);
    expect(failed.body.consecutive_failures).toBe(1);

    tick();
    const update = await http(server, "POST", `/v1/references/${reference.id}/updates`, {
      body: { estimated_departure: "2026-12-01T08:00:00+01:00", vessel: "EVER GIVEN" },
    });
    expect(update.status).toBe(201);
    tick();
    // Same departure, new arrival: only the arrival changes.
    await http(server, "POST", `/v1/references/${reference.id}/updates`, {
      body: { estimated_departure: "2026-12-01T07:00:00Z", estimated_arrival: "2026-12-20T00:00:00Z" },
    });

    tick();
    const deactivated = await http(server, "POST", `/v1/references/${reference.id}/deactivate`, {
      body: { reason: "data_not_found" },
    });
    expect(deactivated.body).toMatchObject({
      active: false,
      deactivate_reason: "data_not_found",
      auto_unsubscribed: false,
    });
    tick();
    expect((await http(server, "POST", `/v1/references/${reference.id}/reactivate`)).body.active).toBe(true);
    expect((await http(server, "POST", `/v1/references/${reference.id}/reactivate`)).status).toBe(409);

    const log = (await events(reference.id)).data;
    expect(log.map((event) => event.type)).toEqual([
      "reference_created",
      "extraction_succeeded",
      "extraction_failed",
      "reference_update_created",
      "estimated_departure_changed",
      "reference_update_created",
      "estimated_arrival_changed",
      "reference_deactivated",
      "reference_reactivated",
    ]);
    for (const event of log) {
      expect(event.reference_id).toBe(reference.id);
      expect(event.occurred_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(event.detail).toMatchObject(base);
    }
    expect(log[0].detail).toEqual({
      ...base,
      identifier_type: "container",
      identifier_value: CONTAINERS[0],
      carrier_scac: "MAEU",
      parent_reference_id: null,
    });
    expect(log[1].detail).toEqual({ ...base, status: "succeeded" });
    expect(log[2].detail).toEqual({
      ...base,
      status: "failed",
      error: { code: "TIMEOUT", message: "carrier did not answer" },
      consecutive_failures: 1,
    });
    expect(log[3].detail).toEqual({
      ...base,
      reference_update_id: update.body.id,
      update: { estimated_departure: "2026-12-01T08:00:00+01:00", vessel: "EVER GIVEN" },
    });
    expect(log[4].detail).toEqual({ ...base, previous: null, current: "2026-12-01T07:00:00.000Z" });
    expect(log[6].detail).toEqual({ ...base, previous: null, current: "2026-12-20T00:00:00.000Z" });
    expect(log[7].detail).toEqual({ ...base, deactivate_reason: "data_not_found", auto_unsubscribed: false });
    expect(log[8].detail).toEqual(base);

    const stored = await http(server, "GET", `/v1/references/${reference.id}/updates`);
    expect(stored.body.data.map((u: any) => u.update)).toEqual([
      { estimated_departure: "2026-12-01T07:00:00Z", estimated_arrival: "2026-12-20T00:00:00Z" },
      { estimated_departure: "2026-12-01T08:00:00+01:00", vessel: "EVER GIVEN" },
    ]);
    const current = await http(server, "GET", `/v1/references/${reference.id}`);
    expect(current.body).toMatchObject({
      estimated_departure: "2026-12-01T07:00:00.000Z",
      estimated_arrival: "2026-12-20T00:00:00.000Z",
      last_update_status: "failed",
    });
  });

  it("deactivates a reference by itself after the configured number of consecutive failures", async () => {
    const reference = await createReference({ booking_number: "BK-FAIL", carrier_code: "MSCU" });
    const fail = () =>
      http(server, "POST", `/v1/references/${reference.id}/extractions`, {
        body: { status: "failed", error: { code: "NOT_FOUND", message: "no data" } },
      });
    await fail();
    await http(server, "POST", `/v1/references/${reference.id}/extractions`, { body: { status: "succeeded" } }); // resets
    await fail();
    await fail();
    const third = await fail();
    expect(third.body).toMatchObject({
      active: false,
      deactivate_reason: "exceeded_extraction_attempt_threshold",
      auto_unsubscribed: true,
      consecutive_failures: 3,
    });
    const deactivations = (await events(reference.id, "?type=reference_deactivated")).data;
    expect(deactivations).toHaveLength(1);
    expect(deactivations[0].detail).toMatchObject({
      deactivate_reason: "exceeded_extraction_attempt_threshold",
      auto_unsubscribed: true,
    });
  });

  it("DELETE deactivates with customer_unsubscribed, once", async () => {
    const reference = await createReference({ bill_of_lading: "BOL-DEL", carrier_code: "HLCU" });
    const deleted = await http(server, "DELETE", `/v1/references/${reference.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toMatchObject({ id: reference.id, active: false, deactivate_reason: "customer_unsubscribed" });
    await http(server, "DELETE", `/v1/references/${reference.id}`);
    expect((await events(reference.id, "?type=reference_deactivated")).data).toHaveLength(1);
  });

  it("creates child containers once, each with a one-time copy of the parent's tags", async () => {
    const parent = await createReference({
      bill_of_lading: "BOL-KIDS",
      carrier_code: "CMDU",
      tags: [{ name: "kids-a" }, { name: "kids-b" }],
    });
    tick();
    const first = await http(server, "POST", `/v1/references/${parent.id}/children`, {
      body: { container_ids: [CONTAINERS[1], CONTAINERS[2]] },
    });
    expect(first.status).toBe(200);
    expect(first.body.data).toHaveLength(2);
    for (const child of first.body.data) {
      expect(child.parent_reference_id).toBe(parent.id);
      expect(child.carrier_code).toBe("CMDU");
      expect(child.tags.map((t: any) => t.name).sort()).toEqual(["kids-a", "kids-b"]);
      const created = (await events(child.id)).data[0];
      expect(created.detail).toMatchObject({ identifier_type: "container", parent_reference_id: parent.id });
    }
    // Later changes on either side do not propagate.
    await http(server, "POST", `/v1/references/${parent.id}/tags`, { body: { tags: [{ name: "kids-later" }] } });
    const childA = first.body.data[0];
    const tagB = childA.tags.find((t: any) => t.name === "kids-b");
    await http(server, "DELETE", `/v1/references/${childA.id}/tags/${tagB.id}`);
    expect((await http(server, "GET", `/v1/references/${parent.id}`)).body.tags.map((t: any) => t.name)).toEqual([
      "kids-a",
      "kids-b",
      "kids-later",
    ]);
    expect((await http(server, "GET", `/v1/references/${childA.id}`)).body.tags.map((t: any) => t.name)).toEqual([
      "kids-a",
    ]);

    const again = await http(server, "POST", `/v1/references/${parent.id}/children`, {
      body: { container_ids: [CONTAINERS[2]] },
    });
    expect(again.body.data.map((c: any) => c.id)).toEqual([first.body.data[1].id]);
    const children = await http(server, "GET", `/v1/references?parent_reference_id=${parent.id}`);
    expect(children.body.data).toHaveLength(2);

    const notParent = await http(server, "POST", `/v1/references/${childA.id}/children`, {
      body: { container_ids: [CONTAINERS[0]] },
    });
    expect(notParent.status).toBe(422);
  });

  it("answers every bad query with a 400 and its own code", async () => {
    const reference = await createReference({ bill_of_lading: "BOL-Q", carrier_code: "MAEU" });
    await http(server, "POST", `/v1/references/${reference.id}/extractions`, { body: { status: "succeeded" } });
    const page = await events(reference.id, "?limit=1");
    const cases: [string, string][] = [
      ["?limit=0", "INVALID_LIMIT"],
      ["?limit=501", "INVALID_LIMIT"],
      ["?limit=2.5", "INVALID_LIMIT"],
      ["?limit=ten", "INVALID_LIMIT"],
      ["?type=reference_created,teleported", "INVALID_EVENT_TYPE"],
      ["?from=2026-11-22T10:00:00", "INVALID_DATE_TIME"],
      ["?to=yesterday", "INVALID_DATE_TIME"],
      ["?from=2026-11-23T00:00:00Z&to=2026-11-22T00:00:00Z", "INVALID_RANGE"],
      ["?order=sideways", "INVALID_ORDER"],
      ["?cursor=garbage", "INVALID_CURSOR"],
      [`?cursor=${page.next_cursor!.slice(0, -2)}xx`, "INVALID_CURSOR"],
      [`?cursor=${page.next_cursor}&type=reference_created`, "CURSOR_FILTER_MISMATCH"],
      [`?cursor=${page.next_cursor}&order=desc`, "CURSOR_FILTER_MISMATCH"],
    ];
    for (const [query, code] of cases) {
      const result = await http(server, "GET", `/v1/references/${reference.id}/events${query}`);
      expect({ query, status: result.status, code: result.body.code }).toEqual({ query, status: 400, code });
      expect(result.headers.get("content-type")).toContain("application/problem+json");
    }
    const unknownType = await http(server, "GET", `/v1/references/${reference.id}/events?type=teleported`);
    expect(unknownType.body.detail).toContain("estimated_arrival_changed");
    expect((await http(server, "GET", `/v1/references/0190a0c0-0000-7000-8000-000000000000/events`)).status).toBe(404);
  });

  it("pages forwards and backwards with filters while events are appended, skipping and repeating nothing", async () => {
    const reference = await createReference({ booking_number: "BK-PAGES", carrier_code: "MAEU" });
    for (let i = 0; i < 12; i++) {
      tick();
      await http(server, "POST", `/v1/references/${reference.id}/extractions`, { body: { status: "succeeded" } });
    }
    const collect = async (query: string, appendWhilePaging: boolean) => {
      const ids: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await events(reference.id, `${query}${cursor ? `&cursor=${cursor}` : ""}`);
        ids.push(...page.data.map((event) => event.id));
        cursor = page.next_cursor;
        if (appendWhilePaging) {
          tick();
          await http(server, "POST", `/v1/references/${reference.id}/extractions`, { body: { status: "succeeded" } });
        }
      } while (cursor);
      return ids;
    };
    const forwards = await collect("?limit=5&type=extraction_succeeded", true);
    expect(new Set(forwards).size).toBe(forwards.length);
    expect(forwards.length).toBeGreaterThanOrEqual(12);
    const all = (await events(reference.id, "?limit=500&type=extraction_succeeded")).data.map((e) => e.id);
    expect(all.slice(0, forwards.length)).toEqual(forwards);

    const backwards = await collect("?limit=4&order=desc&type=extraction_succeeded", false);
    expect(backwards).toEqual([...all].reverse());

    const first = (await events(reference.id, "?limit=500")).data;
    const window = await events(reference.id, `?from=${first[2].occurred_at}&to=${first[4].occurred_at}`);
    expect(window.data.map((e) => e.id)).toEqual(first.slice(2, 5).map((e: any) => e.id));
  });

  it("never returns events older than 18 calendar months, and prunes them", async () => {
    clock.set("2025-05-22T09:59:59.000Z");
    const reference = await createReference({ bill_of_lading: "BOL-OLD", carrier_code: "MAEU" }); // written at 10:00:00
    clock.set("2026-11-22T09:59:00.000Z");
    await http(server, "POST", `/v1/references/${reference.id}/extractions`, { body: { status: "succeeded" } });
    clock.set("2026-11-22T10:00:00.000Z"); // exactly 18 months after the first event: still inside
    expect((await events(reference.id)).data.map((e) => e.type)).toEqual(["reference_created", "extraction_succeeded"]);
    clock.set("2026-11-22T10:00:00.001Z");
    expect((await events(reference.id)).data.map((e) => e.type)).toEqual(["extraction_succeeded"]);
    const prune = () => server.app.services.lifecycleLog.pruneExpiredEvents(1);
    const stored = () => server.database.prisma.lifecycleEvent.count({ where: { referenceId: reference.id } });
    if (server.kind === "postgres") {
      // PostgreSQL drops whole months (partitions): May 2025 straddles the cutoff, so its rows stay, hidden, until
      // the month is wholly past.
      expect(await prune()).toBe(0);
      expect(await stored()).toBe(2);
      expect((await events(reference.id)).data.map((e) => e.type)).toEqual(["extraction_succeeded"]);
      clock.set("2026-12-01T00:00:00.000Z");
    }
    // PostgreSQL reports the catalog's estimate of a dropped month (its statistics may not have seen the row yet);
    // what counts is that the row is gone.
    expect(await prune()).toBeGreaterThanOrEqual(server.kind === "postgres" ? 0 : 1);
    expect(await stored()).toBe(1);
  });
});
