import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gql, gqlData } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, listDeliveries, type Caller } from "./support/webhooks.ts";

/*
 * Webhooks routed by tag (issue 13): an endpoint with a tag filter receives exactly the events whose reference
 * carried one of its tags when the event was written (the event's tag snapshot), AND its event-type filter.
 * A real receiver on loopback checks every signature with the independent `standardwebhooks` package. An
 * endpoint without filters on the same organization is the control: once it has an event, the event was
 * committed, and the routed endpoints' delivery rows (written in the same transaction) are final.
 */

const ENV = { WEBHOOK_RETRY_SCHEDULE: "0s,100ms", WEBHOOK_POLL_INTERVAL: "50ms" };

describe.each(DATABASE_KINDS)("webhooks routed by tag on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  let organizations = 0;

  async function setUp(): Promise<Caller> {
    const { apiKey } = await server.newOrganization(`routing-${++organizations}`);
    return { url: server.url, apiKey };
  }

  async function createTag(caller: Caller, name: string): Promise<string> {
    const created = await http(caller, "POST", "/v1/tags", { body: { name } });
    expectStatus(created, 201);
    return created.body.id;
  }

  async function eventIdsOf(caller: Caller, referenceId: string): Promise<string[]> {
    const events = await http(caller, "GET", `/v1/references/${referenceId}/events?limit=500`);
    expect(events.status).toBe(200);
    return events.body.data.map((event: any) => event.id);
  }

  /** Event ids delivered to `path` with a signature made by `secret`. */
  const verifiedEventIds = (path: string, secret: string) =>
    receiver
      .on(path)
      .filter((hook) => hook.verifiedBy.includes(secret))
      .map((hook) => hook.json.id as string);

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, { env: ENV });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("REST: a routed endpoint receives exactly the events of its tags, by the snapshot taken when each was written", async () => {
    const caller = await setUp();
    const [urgent, reefer, other] = [
      await createTag(caller, "urgent"),
      await createTag(caller, "reefer"),
      await createTag(caller, "other"),
    ];
    const paths = { urgent: `/${kind}/rest/urgent`, both: `/${kind}/rest/both`, all: `/${kind}/rest/all` };
    const routedUrgent = await createEndpoint(caller, { url: receiver.url(paths.urgent), tag_ids: [urgent] });
    expect(routedUrgent).toMatchObject({ tag_ids: [urgent], tag_filter_state: "active" });
    const routedBoth = await createEndpoint(caller, {
      url: receiver.url(paths.both),
      tag_ids: [reefer, urgent, urgent.toUpperCase()],
      event_types: ["reference_created"],
    });
    expect(routedBoth.tag_ids).toEqual([urgent, reefer].sort());
    const unfiltered = await createEndpoint(caller, { url: receiver.url(paths.all) });
    expect(unfiltered).toMatchObject({ tag_ids: null, tag_filter_state: "none" });
    receiver.verifyWith(paths.urgent, routedUrgent.secret);
    receiver.verifyWith(paths.both, routedBoth.secret);
    receiver.verifyWith(paths.all, unfiltered.secret);

    const tagged = await createReference(caller, { tags: [{ id: urgent }] });
    const reeferOnly = await createReference(caller, { tags: [{ id: reefer }] });
    const otherOnly = await createReference(caller, { tags: [{ id: other }, { name: "fresh" }] });
    const untagged = await createReference(caller);
    // Written while `urgent` is on the reference: routed by that snapshot, whenever it is sent.
    const failed = await http(caller, "POST", `/v1/references/${tagged.id}/extractions`, {
      body: { status: "failed", error: { code: "TIMEOUT", message: "carrier timed out" } },
    });
    expect(failed.status).toBe(201);
    const whileTagged = await eventIdsOf(caller, tagged.id);
    expect(whileTagged).toHaveLength(2);

    const removed = await http(caller, "DELETE", `/v1/references/${tagged.id}/tags/${urgent}`);
    expect(removed.status).toBe(204);
    const succeeded = await http(caller, "POST", `/v1/references/${tagged.id}/extractions`, {
      body: { status: "succeeded" },
    });
    expect(succeeded.status).toBe(201);
    const afterRemoval = (await eventIdsOf(caller, tagged.id)).filter((id) => !whileTagged.includes(id));
    expect(afterRemoval).toHaveLength(1);

    const everyEvent = [
      ...whileTagged,
      ...afterRemoval,
      ...(await eventIdsOf(caller, reeferOnly.id)),
      ...(await eventIdsOf(caller, otherOnly.id)),
      ...(await eventIdsOf(caller, untagged.id)),
    ];
    await receiver.waitFor(
      () => everyEvent.every((id) => verifiedEventIds(paths.all, unfiltered.secret).includes(id)),
      10_000,
      "every event on the unfiltered endpoint",
    );
    const [createdTagged] = whileTagged;
    const [createdReefer] = await eventIdsOf(caller, reeferOnly.id);
    const expected = {
      urgent: [...whileTagged].sort(),
      both: [createdTagged!, createdReefer!].sort(),
    };
    // The outbox rows are final once the events committed; the receiver must then get exactly those.
    expect((await listDeliveries(caller, routedUrgent.id)).map((d: any) => d.event_id).sort()).toEqual(expected.urgent);
    expect((await listDeliveries(caller, routedBoth.id)).map((d: any) => d.event_id).sort()).toEqual(expected.both);
    await receiver.waitFor(
      () =>
        verifiedEventIds(paths.urgent, routedUrgent.secret).length >= expected.urgent.length &&
        verifiedEventIds(paths.both, routedBoth.secret).length >= expected.both.length,
      10_000,
      "the routed deliveries",
    );
    expect(verifiedEventIds(paths.urgent, routedUrgent.secret).sort()).toEqual(expected.urgent);
    expect(verifiedEventIds(paths.both, routedBoth.secret).sort()).toEqual(expected.both);
    expect(receiver.on(paths.urgent).every((hook) => hook.verifiedBy.length === 1)).toBe(true);
    // The body's reference_tags is the snapshot that routed it.
    for (const hook of receiver.on(paths.urgent))
      expect(hook.json.reference_tags.map((tag: any) => tag.id)).toContain(urgent);
  });

  it("REST: deleting a tag empties the filters that listed it, and an emptied filter receives nothing", async () => {
    const caller = await setUp();
    const doomed = await createTag(caller, "doomed");
    const kept = await createTag(caller, "kept");
    const paths = { doomed: `/${kind}/rest/doomed`, mixed: `/${kind}/rest/mixed`, all: `/${kind}/rest/all-2` };
    const onlyDoomed = await createEndpoint(caller, { url: receiver.url(paths.doomed), tag_ids: [doomed] });
    const mixed = await createEndpoint(caller, { url: receiver.url(paths.mixed), tag_ids: [doomed, kept] });
    const unfiltered = await createEndpoint(caller, { url: receiver.url(paths.all) });
    receiver.verifyWith(paths.all, unfiltered.secret);

    expect((await http(caller, "DELETE", `/v1/tags/${doomed}`)).status).toBe(204);
    const emptied = await http(caller, "GET", `/v1/webhooks/${onlyDoomed.id}`);
    expect(emptied.body).toMatchObject({ tag_ids: [], tag_filter_state: "empty", enabled: true });
    const narrowed = await http(caller, "GET", `/v1/webhooks/${mixed.id}`);
    expect(narrowed.body).toMatchObject({ tag_ids: [kept], tag_filter_state: "active" });
    const listed = await http(caller, "GET", "/v1/webhooks");
    expect(listed.body.data.find((endpoint: any) => endpoint.id === onlyDoomed.id).tag_filter_state).toBe("empty");

    const carrier = await createReference(caller, { tags: [{ id: kept }] });
    const bare = await createReference(caller);
    const written = [...(await eventIdsOf(caller, carrier.id)), ...(await eventIdsOf(caller, bare.id))];
    await receiver.waitFor(
      () => written.every((id) => verifiedEventIds(paths.all, unfiltered.secret).includes(id)),
      10_000,
      "the events on the unfiltered endpoint",
    );
    // Never everything: the emptied filter is not "no filter".
    expect(await listDeliveries(caller, onlyDoomed.id)).toEqual([]);
    expect(receiver.on(paths.doomed)).toEqual([]);
    expect((await listDeliveries(caller, mixed.id)).map((d: any) => d.event_id)).toEqual(
      await eventIdsOf(caller, carrier.id),
    );

    // Removing the filter (null) makes it receive every reference's events again.
    const cleared = await http(caller, "PATCH", `/v1/webhooks/${onlyDoomed.id}`, { body: { tag_ids: null } });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({ tag_ids: null, tag_filter_state: "none" });
    await createReference(caller);
    expect(await listDeliveries(caller, onlyDoomed.id)).toHaveLength(1);
  });

  it("REST: unknown, foreign and malformed tag ids are refused with a pointer, and nothing is written", async () => {
    const caller = await setUp();
    const mine = await createTag(caller, "mine");
    const stranger = await setUp();
    const theirs = await createTag(stranger, "theirs");
    const unknown = "01900000-0000-7000-8000-000000000000";
    const url = receiver.url(`/${kind}/rest/refused`);

    const refused = await http(caller, "POST", "/v1/webhooks", { body: { url, tag_ids: [mine, theirs, unknown] } });
    expect(refused.status).toBe(422);
    expect(refused.body.errors.map((error: any) => [error.pointer, error.code])).toEqual([
      ["/tag_ids/1", "UNKNOWN_TAG"],
      ["/tag_ids/2", "UNKNOWN_TAG"],
    ]);
    expect(JSON.stringify(refused.body)).not.toContain("theirs");
    const malformed = await http(caller, "POST", "/v1/webhooks", { body: { url, tag_ids: [mine, "not-an-id"] } });
    expect(malformed.status).toBe(422);
    expect(malformed.body.errors[0]).toMatchObject({ pointer: "/tag_ids/1", code: "INVALID_ID" });
    const empty = await http(caller, "POST", "/v1/webhooks", { body: { url, tag_ids: [] } });
    expect(empty.status).toBeGreaterThanOrEqual(400);
    expect(empty.status).toBeLessThan(500);
    expect(empty.body.errors[0].pointer).toBe("/tag_ids");
    expect((await http(caller, "GET", "/v1/webhooks")).body.data).toEqual([]);

    const endpoint = await createEndpoint(caller, { url, tag_ids: [mine] });
    const patched = await http(caller, "PATCH", `/v1/webhooks/${endpoint.id}`, {
      body: { tag_ids: [theirs], description: "changed" },
    });
    expect(patched.status).toBe(422);
    expect(patched.body.errors[0]).toMatchObject({ pointer: "/tag_ids/0", code: "UNKNOWN_TAG" });
    // The refused update changed nothing: neither the filter nor the other fields.
    const read = await http(caller, "GET", `/v1/webhooks/${endpoint.id}`);
    expect(read.body).toMatchObject({ tag_ids: [mine], description: null });
  });

  it("GraphQL: tagIds on create, read and update; routed deliveries; errors point at the id", async () => {
    const caller = await setUp();
    const server2 = { url: caller.url, apiKey: caller.apiKey };
    const urgent = await createTag(caller, "urgent");
    const reefer = await createTag(caller, "reefer");
    const path = `/${kind}/graphql/routed`;
    const create = `mutation ($input: CreateWebhookEndpointInput!) {
      createWebhookEndpoint(input: $input) { secret webhookEndpoint { id tagIds tagFilterState } }
    }`;
    const created = (await gqlData(server2, create, { input: { url: receiver.url(path), tagIds: [urgent] } }))
      .createWebhookEndpoint;
    expect(created.webhookEndpoint).toMatchObject({ tagIds: [urgent], tagFilterState: "ACTIVE" });
    receiver.verifyWith(path, created.secret);

    const carrier = await createReference(caller, { tags: [{ id: urgent }] });
    await createReference(caller, { tags: [{ id: reefer }] });
    const expected = await eventIdsOf(caller, carrier.id);
    await receiver.waitFor(() => verifiedEventIds(path, created.secret).length >= 1, 10_000, "the routed event");
    const read = await gqlData(
      server2,
      `query ($id: ID!) { webhookEndpoint(id: $id) { tagIds tagFilterState deliveries(first: 10) { edges { node { eventId } } } } }`,
      { id: created.webhookEndpoint.id },
    );
    expect(read.webhookEndpoint.deliveries.edges.map((edge: any) => edge.node.eventId)).toEqual(expected);
    expect(verifiedEventIds(path, created.secret)).toEqual(expected);

    const update = `mutation ($input: UpdateWebhookEndpointInput!) {
      updateWebhookEndpoint(input: $input) { webhookEndpoint { tagIds tagFilterState } }
    }`;
    const widened = await gqlData(server2, update, { input: { id: created.webhookEndpoint.id, tagIds: [reefer] } });
    expect(widened.updateWebhookEndpoint.webhookEndpoint).toEqual({ tagIds: [reefer], tagFilterState: "ACTIVE" });
    const refused = await gql(server2, create, {
      input: { url: receiver.url(path), tagIds: [urgent, "01900000-0000-7000-8000-000000000000"] },
    });
    expect(refused.body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED", field: "input.tagIds.1" });
    await http(caller, "DELETE", `/v1/tags/${reefer}`);
    const emptied = await gqlData(server2, `query ($id: ID!) { webhookEndpoint(id: $id) { tagIds tagFilterState } }`, {
      id: created.webhookEndpoint.id,
    });
    expect(emptied.webhookEndpoint).toEqual({ tagIds: [], tagFilterState: "EMPTY" });
    const cleared = await gqlData(server2, update, { input: { id: created.webhookEndpoint.id, tagIds: null } });
    expect(cleared.updateWebhookEndpoint.webhookEndpoint).toEqual({ tagIds: null, tagFilterState: "NONE" });
  });
});
