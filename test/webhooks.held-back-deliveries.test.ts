import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gqlData } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually, getDelivery, listDeliveries } from "./support/webhooks.ts";

/*
 * Each delivery says whether it waits behind an earlier delivery of its reference (ordering "reference"), on
 * REST (`held_back`) and GraphQL (`heldBack`): the first delivery of a reference fails and waits an hour for its
 * retry, and the later ones of the same reference are held back behind it, whatever their own due time says.
 */

const ENV = { WEBHOOK_RETRY_SCHEDULE: "0s,1h", WEBHOOK_POLL_INTERVAL: "50ms", WEBHOOK_DISABLE_AFTER: "1h" };

describe.each(DATABASE_KINDS)("held-back deliveries on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, { env: ENV });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("says which pending deliveries wait behind an earlier one of their reference, and which do not", async () => {
    const path = `/${kind}/held`;
    receiver.respond(path, () => ({ status: 503 }));
    const endpoint = await createEndpoint(server, { url: receiver.url(path), ordering: "reference" });
    const reference = await createReference(server);
    for (const status of ["succeeded", "succeeded"]) {
      expectStatus(await http(server, "POST", `/v1/references/${reference.id}/extractions`, { body: { status } }), 201);
    }
    // The first event's delivery was tried (and failed: its retry is an hour away); the two after it wait.
    await receiver.waitFor(() => receiver.on(path).length === 1, 15_000);
    const deliveries = await eventually(async () => {
      const listed = await listDeliveries(server, endpoint.id);
      return listed.length === 3 && listed.every((delivery) => delivery.status === "pending") ? listed : null;
    }, 15_000);
    const first = receiver.on(path)[0]!.webhookId;
    const byId = new Map(deliveries.map((delivery) => [delivery.id, delivery.held_back]));
    expect(byId.get(first)).toBe(false);
    expect([...byId].filter(([id]) => id !== first).map(([, heldBack]) => heldBack)).toEqual([true, true]);
    const waiting = deliveries.find((delivery) => delivery.id !== first)!;
    expect(await getDelivery(server, endpoint.id, waiting.id)).toMatchObject({
      held_back: true,
      held_back_reason: "ordering",
    });
    expect(deliveries.find((delivery) => delivery.id === first)!.held_back_reason).toBeNull();

    const data = await gqlData(
      server,
      `query($id: ID!) { webhookEndpoint(id: $id) { deliveries(first: 10) { edges { node { id heldBack } } } } }`,
      { id: endpoint.id },
    );
    const nodes = data.webhookEndpoint.deliveries.edges.map((edge: { node: { id: string; heldBack: boolean } }) => [
      edge.node.id,
      edge.node.heldBack,
    ]);
    expect(new Map(nodes)).toEqual(byId);

    // Without ordering nothing waits behind anything.
    expectStatus(await http(server, "PATCH", `/v1/webhooks/${endpoint.id}`, { body: { ordering: "none" } }), 200);
    const released = await listDeliveries(server, endpoint.id);
    expect(released.filter((delivery) => delivery.held_back)).toEqual([]);
  }, 60_000);
});
