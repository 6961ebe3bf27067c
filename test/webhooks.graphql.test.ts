import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gql, gqlData } from "./support/graphql-client.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { eventually } from "./support/webhooks.ts";

/*
 * Webhooks through GraphQL: the same service as the REST suite (webhooks.rest.test.ts covers the delivery
 * rules), here the mutations, the endpoint with its deliveries and attempts, and the error codes.
 */

const ENDPOINT_FIELDS = `id url eventTypes description enabled disabledReason failingSince previousSecretExpiresAt createdAt updatedAt`;
const CREATE = `mutation ($input: CreateWebhookEndpointInput!) {
  createWebhookEndpoint(input: $input) { secret webhookEndpoint { ${ENDPOINT_FIELDS} } }
}`;
const ENDPOINT_WITH_DELIVERIES = `query ($id: ID!, $status: WebhookDeliveryStatus) {
  webhookEndpoint(id: $id) {
    ${ENDPOINT_FIELDS}
    deliveries(first: 10, filter: { status: $status }) {
      edges { cursor node { id endpointId eventId eventType status attemptCount nextAttemptAt body createdAt updatedAt
        attempts { id attemptedAt statusCode error latencyMs responseBody } } }
      pageInfo { hasNextPage endCursor }
    }
  }
}`;

describe.each(DATABASE_KINDS)("webhooks over GraphQL on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, {
      env: { WEBHOOK_RETRY_SCHEDULE: "0s,100ms", WEBHOOK_POLL_INTERVAL: "50ms" },
    });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("creates, reads, updates, rotates, tests, re-sends and deletes an endpoint", async () => {
    const path = `/graphql-${kind}`;
    const created = (
      await gqlData(server, CREATE, {
        input: { url: receiver.url(path), eventTypes: ["REFERENCE_CREATED"], description: "ops" },
      })
    ).createWebhookEndpoint;
    expect(created.secret).toMatch(/^whsec_/);
    expect(created.webhookEndpoint).toMatchObject({
      url: receiver.url(path),
      eventTypes: ["REFERENCE_CREATED"],
      enabled: true,
      description: "ops",
    });
    const id = created.webhookEndpoint.id as string;
    receiver.verifyWith(path, created.secret);

    await gqlData(
      server,
      `mutation { createReference(input: { bookingNumber: "BK-GQL-HOOK", carrierCode: "MSCU" }) { reference { id } } }`,
    );
    const [hook] = await receiver.waitForCount(path, 1);
    expect(hook!.verifiedBy).toEqual([created.secret]);

    const read = await eventually(async () => {
      const data = await gqlData(server, ENDPOINT_WITH_DELIVERIES, { id });
      return data.webhookEndpoint.deliveries.edges[0]?.node.status === "SUCCEEDED" ? data.webhookEndpoint : null;
    });
    const delivery = read.deliveries.edges[0].node;
    expect(delivery).toMatchObject({
      id: hook!.webhookId,
      endpointId: id,
      eventType: "REFERENCE_CREATED",
      attemptCount: 1,
      nextAttemptAt: null,
    });
    expect(delivery.body).toEqual(hook!.json);
    expect(delivery.attempts).toHaveLength(1);
    expect(delivery.attempts[0]).toMatchObject({ statusCode: 200, error: null, responseBody: "ok" });
    expect(
      (await gqlData(server, ENDPOINT_WITH_DELIVERIES, { id, status: "FAILED" })).webhookEndpoint.deliveries.edges,
    ).toEqual([]);

    const listed = await gqlData(
      server,
      `{ webhookEndpoints(first: 5) { edges { node { id } } pageInfo { hasNextPage } } }`,
    );
    expect(listed.webhookEndpoints.edges.map((edge: any) => edge.node.id)).toContain(id);
    const one = await gqlData(server, `query ($id: ID!) { webhookDelivery(id: $id) { id attempts { statusCode } } }`, {
      id: delivery.id,
    });
    expect(one.webhookDelivery).toEqual({ id: delivery.id, attempts: [{ statusCode: 200 }] });

    const updated = await gqlData(
      server,
      `mutation ($input: UpdateWebhookEndpointInput!) { updateWebhookEndpoint(input: $input) { webhookEndpoint { ${ENDPOINT_FIELDS} } } }`,
      { input: { id, eventTypes: null, description: null } },
    );
    expect(updated.updateWebhookEndpoint.webhookEndpoint).toMatchObject({
      eventTypes: null,
      description: null,
      url: receiver.url(path),
    });

    const rotated = (
      await gqlData(
        server,
        `mutation ($id: ID!) { rotateWebhookEndpointSecret(input: { id: $id }) { secret webhookEndpoint { previousSecretExpiresAt } } }`,
        { id },
      )
    ).rotateWebhookEndpointSecret;
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.webhookEndpoint.previousSecretExpiresAt).not.toBeNull();
    receiver.verifyWith(path, created.secret, rotated.secret);

    const test = await gqlData(
      server,
      `mutation ($id: ID!) { sendTestWebhook(input: { endpointId: $id }) { delivery { id eventType status } } }`,
      { id },
    );
    expect(test.sendTestWebhook.delivery).toMatchObject({ eventType: "WEBHOOK_TEST", status: "PENDING" });
    const [, testHook] = await receiver.waitForCount(path, 2);
    expect(testHook!.webhookId).toBe(test.sendTestWebhook.delivery.id);
    expect(testHook!.verifiedBy).toEqual([created.secret, rotated.secret]);

    const resent = await gqlData(
      server,
      `mutation ($id: ID!) { resendWebhookDelivery(input: { deliveryId: $id }) { delivery { id status attemptCount } } }`,
      {
        id: delivery.id,
      },
    );
    expect(resent.resendWebhookDelivery.delivery).toMatchObject({
      id: delivery.id,
      status: "PENDING",
      attemptCount: 1,
    });
    const [, , again] = await receiver.waitForCount(path, 3);
    expect(again!.webhookId).toBe(hook!.webhookId);
    expect(again!.body).toBe(hook!.body);
    // The re-send's attempt is counted on top of the first one, as the attempts list shows them.
    const settled = await eventually(async () => {
      const data = await gqlData(
        server,
        `query ($id: ID!) { webhookDelivery(id: $id) { status attemptCount attempts { statusCode } } }`,
        { id: delivery.id },
      );
      return data.webhookDelivery.status === "SUCCEEDED" ? data.webhookDelivery : null;
    });
    expect(settled).toEqual({
      status: "SUCCEEDED",
      attemptCount: 2,
      attempts: [{ statusCode: 200 }, { statusCode: 200 }],
    });

    const deleted = await gqlData(
      server,
      `mutation ($id: ID!) { deleteWebhookEndpoint(input: { id: $id }) { deletedWebhookEndpointId } }`,
      { id },
    );
    expect(deleted.deleteWebhookEndpoint.deletedWebhookEndpointId).toBe(id);
    const gone = await gql(server, `query ($id: ID!) { webhookEndpoint(id: $id) { id } }`, { id });
    expect(gone.body.errors?.[0]?.extensions?.code).toBe("NOT_FOUND");
  });

  it("reports invalid input with codes and fields", async () => {
    const invalid = await gql(server, CREATE, {
      input: { url: "ftp://example.com/hook", eventTypes: ["REFERENCE_CREATED"] },
    });
    expect(invalid.body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED", field: "input.url" });
    const empty = await gql(server, CREATE, { input: { url: "https://93.184.215.14/hook", eventTypes: [] } });
    expect(empty.body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED", field: "input.eventTypes" });
    const other = await server.newOrganization("graphql-other");
    const mine = (await gqlData(server, CREATE, { input: { url: "https://93.184.215.14/hook" } })).createWebhookEndpoint
      .webhookEndpoint.id;
    const hidden = await gql(
      { url: server.url, apiKey: other.apiKey },
      `query ($id: ID!) { webhookEndpoint(id: $id) { id } }`,
      { id: mine },
    );
    expect(hidden.body.errors?.[0]?.extensions?.code).toBe("NOT_FOUND");
    const badCursor = await gql(
      server,
      `query ($id: ID!) { webhookEndpoint(id: $id) { deliveries(after: "nope") { edges { cursor } } } }`,
      { id: mine },
    );
    expect(badCursor.body.errors?.[0]?.extensions).toMatchObject({ code: "INVALID_CURSOR", field: "after" });
  });
});
