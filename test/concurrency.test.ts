import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gql } from "./support/graphql-client.ts";
import { expectStatus, http, type HttpResult } from "./support/http.ts";
import { withLabel } from "./support/with-label.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { createEndpoint, createReference, listDeliveries, type Caller } from "./support/webhooks.ts";

/*
 * Parallel requests on one reference, tag or organization (issue 10): every check-then-write must be decided by
 * the database, because several instances share one PostgreSQL. SQLite serializes writers by itself, so these
 * races bite on PostgreSQL; they run on both so that the guarantees hold whichever database is configured.
 * Each test works in its own organization.
 */

const ORGANIZATION_TAG_LIMIT = 20;

/** Fires every request at once and waits for all of them. */
function race<T>(count: number, request: (index: number) => Promise<T>): Promise<T[]> {
  return Promise.all(Array.from({ length: count }, (_, index) => request(index)));
}

/** The whole lifecycle log of a reference, oldest first. */
async function eventsOf(caller: Caller, referenceId: string): Promise<any[]> {
  const events: any[] = [];
  let cursor: string | null = null;
  do {
    const query: string = cursor ? `?limit=500&cursor=${cursor}` : "?limit=500";
    const page: HttpResult = await http(caller, "GET", `/v1/references/${referenceId}/events${query}`);
    expectStatus(page, 200);
    events.push(...page.body.data);
    cursor = page.body.next_cursor;
  } while (cursor);
  return events;
}

const statuses = (results: readonly HttpResult[]) => results.map((result) => result.status).sort();

describe.each(DATABASE_KINDS)("state changes under concurrency on %s", (kind) => {
  let server: TestServer;
  /** A second server whose organizations may hold only a few tags. */
  let limited: TestServer;
  let organizations = 0;

  async function newCaller(on: TestServer = server): Promise<Caller> {
    const { apiKey } = await on.newOrganization(`races-${++organizations}`);
    return { url: on.url, apiKey };
  }

  beforeAll(async () => {
    [server, limited] = await Promise.all([
      // The worker polls rarely: these tests count deliveries written, not sent.
      startTestServer(kind, { env: { WEBHOOK_POLL_INTERVAL: "1h" } }),
      startTestServer(kind, { env: { MAX_TAGS_PER_ORGANIZATION: String(ORGANIZATION_TAG_LIMIT) } }),
    ]);
  });
  afterAll(async () => {
    await Promise.all([server?.close(), limited?.close()]);
  });

  it("five parallel DELETEs log one reference_deactivated event and write one webhook delivery", async () => {
    const caller = await newCaller();
    const endpoint = await createEndpoint(caller, {
      url: "http://127.0.0.1:9/hook",
      event_types: ["reference_deactivated"],
    });
    const reference = await createReference(caller);

    const results = await race(5, () => http(caller, "DELETE", `/v1/references/${reference.id}`));

    // The losers get the reference in its current state, as an idempotent DELETE should.
    expect(statuses(results)).toEqual([200, 200, 200, 200, 200]);
    for (const result of results) {
      expect(result.body).toMatchObject({
        id: reference.id,
        active: false,
        deactivate_reason: "customer_unsubscribed",
      });
    }
    const deactivations = (await eventsOf(caller, reference.id)).filter((e) => e.type === "reference_deactivated");
    expect(deactivations).toHaveLength(1);
    expect(await listDeliveries(caller, endpoint.id)).toHaveLength(1);
  });

  it("a deactivate/reactivate race logs strictly alternating state changes, one per change made", async () => {
    const caller = await newCaller();
    const reference = await createReference(caller);

    const results = await race(24, (index) =>
      index % 2 === 0
        ? http(caller, "POST", `/v1/references/${reference.id}/deactivate`, { body: { reason: "data_not_found" } })
        : http(caller, "POST", `/v1/references/${reference.id}/reactivate`),
    );

    const reactivations = results.filter((_, index) => index % 2 === 1);
    for (const result of results) expect([200, 409]).toContain(result.status);
    for (const result of reactivations.filter((r) => r.status === 409)) expect(result.body.code).toBe("CONFLICT");
    const changes = (await eventsOf(caller, reference.id))
      .map((event) => event.type)
      .filter((type) => type === "reference_deactivated" || type === "reference_reactivated");
    expect(changes.length).toBeGreaterThan(0);
    // They alternate, starting with a deactivation.
    expect(changes).toEqual(
      changes.map((_, index) => (index % 2 === 0 ? "reference_deactivated" : "reference_reactivated")),
    );
    // Every successful reactivation changed the state, so each has its own event.
    expect(changes.filter((type) => type === "reference_reactivated")).toHaveLength(
      reactivations.filter((result) => result.status === 200).length,
    );
    const final = await http(caller, "GET", `/v1/references/${reference.id}`);
    expect(final.body.active).toBe(changes.at(-1) === "reference_reactivated");
  });

  it("fifty parallel failed extractions count 1..50 and deactivate once at the threshold", async () => {
    const caller = await newCaller();
    const reference = await createReference(caller);
    const threshold = server.config.extractionFailureThreshold;

    const results = await race(50, (index) =>
      http(caller, "POST", `/v1/references/${reference.id}/extractions`, {
        body: { status: "failed", error: { code: "TIMEOUT", message: `attempt ${index}` } },
      }),
    );

    expect(statuses(results)).toEqual(Array(50).fill(201));
    const events = await eventsOf(caller, reference.id);
    const counts = events.filter((e) => e.type === "extraction_failed").map((e) => e.detail.consecutive_failures);
    expect(counts).toEqual(Array.from({ length: 50 }, (_, index) => index + 1));
    const deactivations = events.filter((e) => e.type === "reference_deactivated");
    expect(deactivations).toHaveLength(1);
    expect(deactivations[0].detail).toMatchObject({
      deactivate_reason: "exceeded_extraction_attempt_threshold",
      auto_unsubscribed: true,
    });
    // It follows the failure that reached the threshold, before the next one.
    const position = events.indexOf(deactivations[0]);
    expect(events[position - 1].detail.consecutive_failures).toBe(threshold);
    const final = await http(caller, "GET", `/v1/references/${reference.id}`);
    expect(final.body).toMatchObject({ active: false, deactivate_reason: "exceeded_extraction_attempt_threshold" });
  });

  it("twenty parallel reports of one container create one child, and every caller gets it", async () => {
    const caller = await newCaller();
    const parent = await createReference(caller);

    const results = await race(20, () =>
      http(caller, "POST", `/v1/references/${parent.id}/children`, { body: { container_ids: ["MSCU1234566"] } }),
    );

    expect(statuses(results)).toEqual(Array(20).fill(200));
    const ids = new Set(results.map((result) => result.body.data[0].id));
    expect(ids.size).toBe(1);
    const children = await http(caller, "GET", `/v1/references?parent_reference_id=${parent.id}`);
    expect(children.body.data.map((child: any) => child.id)).toEqual([...ids]);
    const created = (await eventsOf(caller, [...ids][0]!)).filter((e) => e.type === "reference_created");
    expect(created).toHaveLength(1);
  });

  it("fifty parallel reports of three containers create three children", async () => {
    const caller = await newCaller();
    const parent = await createReference(caller);
    const containers = ["MSCU1234566", "CSQU3054383", "TGHU9876542"];

    const results = await race(50, (index) =>
      http(caller, "POST", `/v1/references/${parent.id}/children`, {
        // Every rotation of the list, so that callers insert in different orders.
        body: { container_ids: [...containers.slice(index % 3), ...containers.slice(0, index % 3)] },
      }),
    );

    expect(statuses(results)).toEqual(Array(50).fill(200));
    const children = await http(caller, "GET", `/v1/references?parent_reference_id=${parent.id}`);
    expect(children.body.data.map((child: any) => child.container_id).sort()).toEqual([...containers].sort());
    const idByContainer = new Map(children.body.data.map((child: any) => [child.container_id, child.id]));
    for (const result of results) {
      for (const child of result.body.data) expect(child.id).toBe(idByContainer.get(child.container_id));
    }
  });

  it("the per-reference tag limit holds under parallel adds", async () => {
    const caller = await newCaller();
    const reference = await createReference(caller);
    const limit = server.config.maxTagsPerReference;
    const preloaded = Array.from({ length: limit - 10 }, (_, n) => ({ name: `preloaded-${n}` }));
    expect(
      (await http(caller, "POST", `/v1/references/${reference.id}/tags`, { body: { tags: preloaded } })).status,
    ).toBe(200);

    // Twenty requests of five new tags each, when only ten more fit: two of them.
    const results = await race(20, (index) =>
      http(caller, "POST", `/v1/references/${reference.id}/tags`, {
        body: { tags: Array.from({ length: 5 }, (_, n) => ({ name: `batch-${index}-${n}` })) },
      }),
    );

    const accepted = results.filter((result) => result.status === 200);
    for (const result of results.filter((r) => r.status !== 200)) {
      expect(result.status).toBe(422);
      expect(result.body.code).toBe("LIMIT_EXCEEDED");
    }
    const final = await http(caller, "GET", `/v1/references/${reference.id}`);
    expect(final.body.tags.length).toBeLessThanOrEqual(limit);
    expect(final.body.tags).toHaveLength(preloaded.length + accepted.length * 5);
    expect(accepted).toHaveLength(2);
  });

  it("the per-organization tag limit holds under parallel creations and adds", async () => {
    const caller = await newCaller(limited);
    const reference = await createReference(caller);

    const results = await race(30, (index) =>
      index % 3 === 0
        ? http(caller, "POST", `/v1/references/${reference.id}/tags`, {
            body: { tags: [{ name: `added-${index}-a` }, { name: `added-${index}-b` }] },
          })
        : http(caller, "POST", "/v1/tags", { body: { name: `created-${index}` } }),
    );

    for (const result of results.filter((r) => r.status !== 200 && r.status !== 201)) {
      expect(result.status).toBe(422);
      expect(result.body.code).toBe("LIMIT_EXCEEDED");
    }
    const tags = await http(caller, "GET", "/v1/tags?limit=500");
    expect(tags.body.data.length).toBeLessThanOrEqual(ORGANIZATION_TAG_LIMIT);
    const saved = results.reduce(
      (sum, result, index) => sum + (result.status === 200 || result.status === 201 ? (index % 3 === 0 ? 2 : 1) : 0),
      0,
    );
    expect(tags.body.data).toHaveLength(saved);
    // Refusals come only once the organization is full (a lost race must not refuse what fits).
    expect(saved).toBeGreaterThanOrEqual(ORGANIZATION_TAG_LIMIT - 1);
  });

  it("concurrent case-insensitive renames to one name: one 200, the rest 409 naming the holder", async () => {
    const caller = await newCaller();
    const tags = await race(12, async (index) => {
      const created = await http(caller, "POST", "/v1/tags", { body: { name: `draft-${index}` } });
      expect(created.status).toBe(201);
      return created.body;
    });

    const spellings = ["Shipped", "shipped", "SHIPPED"];
    const results = await race(tags.length, (index) =>
      http(caller, "PATCH", `/v1/tags/${tags[index].id}`, { body: { name: spellings[index % 3] } }),
    );

    expect(statuses(results)).toEqual([200, ...Array(tags.length - 1).fill(409)]);
    const winner = results.find((result) => result.status === 200)!.body;
    for (const result of results.filter((r) => r.status === 409)) {
      expect(result.body.code).toBe("CONFLICT");
      expect(result.body.existing_tag).toEqual({ id: winner.id, name: winner.name, created_at: winner.created_at });
    }
  });

  it("through GraphQL too: racing renames give one tag and CONFLICT errors, racing state changes alternate", async () => {
    const caller = await newCaller();
    const tags = await race(6, async (index) => {
      const created = await http(caller, "POST", "/v1/tags", { body: { name: `gql-draft-${index}` } });
      return created.body;
    });
    const renames = await race(tags.length, (index) =>
      gql(caller, `mutation ($input: RenameTagInput!) { renameTag(input: $input) { tag { id name } } }`, {
        input: { id: tags[index].id, name: index % 2 ? "Customs Hold" : "customs hold" },
      }),
    );
    const renamed = renames.filter((result) => result.body.data?.renameTag);
    expect(renamed).toHaveLength(1);
    const winner = renamed[0]!.body.data.renameTag.tag;
    for (const result of renames.filter((r) => !r.body.data?.renameTag)) {
      expect(result.body.errors?.[0]?.extensions).toMatchObject({ code: "CONFLICT", existingTag: winner });
    }

    const reference = await createReference(caller);
    const changes = await race(12, (index) =>
      index % 2 === 0
        ? gql(
            caller,
            `mutation ($input: DeactivateReferenceInput!) { deactivateReference(input: $input) { reference { id } } }`,
            { input: { referenceId: reference.id, reason: "DATA_NOT_FOUND" } },
          )
        : gql(
            caller,
            `mutation ($input: ReactivateReferenceInput!) { reactivateReference(input: $input) { reference { id } } }`,
            { input: { referenceId: reference.id } },
          ),
    );
    for (const result of changes) {
      const code = result.body.errors?.[0]?.extensions?.code;
      withLabel(JSON.stringify(result.body), () => expect(code === undefined || code === "CONFLICT").toBe(true));
    }
    const log = (await eventsOf(caller, reference.id))
      .map((event) => event.type)
      .filter((type) => type === "reference_deactivated" || type === "reference_reactivated");
    log.forEach((type, index) =>
      expect(type).toBe(index % 2 === 0 ? "reference_deactivated" : "reference_reactivated"),
    );
    const reactivated = changes.filter((result, index) => index % 2 === 1 && !result.body.errors);
    expect(log.filter((type) => type === "reference_reactivated")).toHaveLength(reactivated.length);
  });
});
