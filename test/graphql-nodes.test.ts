import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gql, gqlData } from "./support/graphql-client.ts";
import { http } from "./support/http.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { eventually } from "./support/webhooks.ts";
import { withLabel } from "./support/with-label.ts";

/*
 * Relay global object identification: `Query.node(id)` and `Query.nodes(ids)` find any object by the same
 * plain UUID it has on every surface, name its type, hide other organizations' objects, and read any number of
 * ids in a fixed number of statements.
 */

const NODE = `
  query ($id: ID!) {
    node(id: $id) {
      __typename
      id
      ... on Tag { name }
      ... on Reference { containerId tags { id } }
      ... on ReferenceUpdate { document }
      ... on LifecycleEvent { type }
      ... on WebhookEndpoint { url }
      ... on WebhookDelivery { eventType attempts { id } }
      ... on WebhookAttempt { statusCode }
    }
  }`;

const NODES = `query ($ids: [ID!]!) { nodes(ids: $ids) { __typename id } }`;

const MISSING_ID = "01900000-0000-7000-8000-000000000000";

describe.each(DATABASE_KINDS)("Relay nodes on %s", (kind) => {
  let server: TestServer;
  /** A second instance on the same database, without a webhook worker, whose statements are counted. */
  let counted: TestServer;
  let receiver: WebhookReceiver;
  /** Statements counted by the server's query hook, reset by `measure`. */
  let statements = 0;
  const ids: Record<string, string> = {};
  /** Every event of the reference (created, then its update): more than one event read in one statement. */
  let eventIds: string[] = [];

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, {
      env: { WEBHOOK_RETRY_SCHEDULE: "0s", WEBHOOK_POLL_INTERVAL: "50ms" },
    });
    const endpoint = await http(server, "POST", "/v1/webhooks", { body: { url: receiver.url(`/${kind}`) } });
    ids.WebhookEndpoint = endpoint.body.id;
    const tag = await http(server, "POST", "/v1/tags", { body: { name: "node-tag" } });
    ids.Tag = tag.body.id;
    const reference = await http(server, "POST", "/v1/references", {
      body: { container_id: "CSQU3054383", carrier_code: "MAEU", tags: [{ id: ids.Tag }] },
    });
    ids.Reference = reference.body.reference.id;
    const update = await http(server, "POST", `/v1/references/${ids.Reference}/updates`, {
      body: { vessel: "Ever Given" },
    });
    ids.ReferenceUpdate = update.body.id;
    const events = await http(server, "GET", `/v1/references/${ids.Reference}/events`);
    ids.LifecycleEvent = events.body.data[0].id;
    eventIds = events.body.data.map((event: { id: string }) => event.id);
    const delivery = await eventually(
      async () =>
        (await http(server, "GET", `/v1/webhooks/${ids.WebhookEndpoint}/deliveries?status=succeeded`)).body.data[0],
      15_000,
      "a delivered webhook",
    );
    ids.WebhookDelivery = delivery.id;
    const detail = await http(server, "GET", `/v1/webhooks/${ids.WebhookEndpoint}/deliveries/${delivery.id}`);
    ids.WebhookAttempt = detail.body.attempts[0].id;
    counted = await startInstanceOn(server, { onQuery: () => void statements++, env: { WEBHOOK_WORKER: "off" } });
  }, 60_000);

  afterAll(async () => {
    await counted?.close();
    await server?.close();
    await receiver?.close();
  });

  it("finds every type by its id and names its type", async () => {
    for (const [typename, id] of Object.entries(ids)) {
      const data = await gqlData(server, NODE, { id });
      withLabel(typename, () => expect(data.node).toMatchObject({ __typename: typename, id }));
    }
    const tag = await gqlData(server, NODE, { id: ids.Tag!.toUpperCase() });
    expect(tag.node).toEqual({ __typename: "Tag", id: ids.Tag, name: "node-tag" });
    const reference = await gqlData(server, NODE, { id: ids.Reference });
    expect(reference.node.tags).toEqual([{ id: ids.Tag }]);
    const delivery = await gqlData(server, NODE, { id: ids.WebhookDelivery });
    expect(delivery.node.attempts.map((attempt: { id: string }) => attempt.id)).toContain(ids.WebhookAttempt);
  });

  it("answers null for missing, malformed and other organizations' ids, in the order asked", async () => {
    const other = await server.newOrganization("other");
    const asOther = { url: server.url, apiKey: other.apiKey };
    for (const id of Object.values(ids)) {
      expect((await gqlData(asOther, NODE, { id })).node).toBeNull();
    }
    const data = await gqlData(server, NODES, { ids: [ids.Reference, MISSING_ID, "not-an-id", ids.Tag, ids.Tag] });
    expect(data.nodes).toEqual([
      { __typename: "Reference", id: ids.Reference },
      null,
      null,
      { __typename: "Tag", id: ids.Tag },
      { __typename: "Tag", id: ids.Tag },
    ]);
    expect((await gqlData(asOther, NODES, { ids: Object.values(ids) })).nodes).toEqual(
      Object.values(ids).map(() => null),
    );
  });

  it("finds several events of one request, each by its own id", async () => {
    expect(eventIds.length).toBeGreaterThan(1);
    const data = await gqlData(
      server,
      `query ($ids: [ID!]!) { nodes(ids: $ids) { id ... on LifecycleEvent { type } } }`,
      {
        ids: eventIds,
      },
    );
    expect(data.nodes.map((node: { id: string } | null) => node?.id)).toEqual(eventIds);
    expect(data.nodes.map((node: { type: string }) => node.type)).toEqual(
      expect.arrayContaining(["REFERENCE_CREATED", "REFERENCE_UPDATE_CREATED"]),
    );
  });

  it("reads 50 ids in as many statements as 2", async () => {
    const tags = await Promise.all(
      Array.from({ length: 48 }, (_, index) => http(server, "POST", "/v1/tags", { body: { name: `bulk-${index}` } })),
    );
    const many = [...Object.values(ids), ...tags.map((tag) => tag.body.id as string)].slice(0, 50);
    expect(many).toHaveLength(50);
    const measure = async (query: string, variables: Record<string, unknown>) => {
      statements = 0;
      const data = await gqlData(counted, query, variables);
      return { data, statements };
    };
    // What any operation costs (authentication), to tell the nodes' own statements apart.
    const baseline = await measure(`{ __typename }`, {});
    const two = await measure(NODES, { ids: many.slice(0, 2) });
    const fifty = await measure(NODES, { ids: many });
    expect(fifty.data.nodes.map((node: { id: string }) => node.id)).toEqual(many);
    expect(fifty.statements).toBe(two.statements);
    // One query per kind of node (tags, references, updates, events, endpoints with their tag filters,
    // deliveries, attempts).
    expect(fifty.statements - baseline.statements).toBe(7);
  });

  it("refuses more than 100 ids with BAD_USER_INPUT", async () => {
    const result = await gql(server, NODES, { ids: Array.from({ length: 101 }, () => MISSING_ID) });
    expect(result.body.errors?.[0]?.extensions).toMatchObject({ code: "BAD_USER_INPUT", field: "ids" });
  });
});
