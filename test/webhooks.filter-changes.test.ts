import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { gqlData } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually, listDeliveries } from "./support/webhooks.ts";

/*
 * A narrowed filter applies to deliveries already scheduled (SPEC §9.2, issue 50.3): while a replay of a few
 * hundred events drains, the endpoint's event_types are narrowed; from the moment that change is answered, no
 * delivery of a type the endpoint no longer takes begins. Those scheduled and not begun are dropped unsent, and
 * the delivery log says why (`dropped_reason: "filter_excluded"`, no attempt). When a request began is read from
 * the delivery log (`attemptedAt`, taken just before the request starts), compared with the instant the change's
 * answer reached the test: an ordering of two facts, not a duration.
 */

const CHILDREN = 240;
const OUTCOMES = 20;
// Two requests at a time to the endpoint, each answered after 40 ms: the replay drains for seconds.
const ENV = {
  WEBHOOK_RETRY_SCHEDULE: "0s,50ms",
  WEBHOOK_POLL_INTERVAL: "50ms",
  WEBHOOK_CONCURRENCY_PER_ENDPOINT: "2",
};

function containerNumber(kind: string, serial: number): string {
  const firstTen = `${kind === "sqlite" ? "FSQU" : "FPGU"}${String(serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

interface DeliveryNode {
  id: string;
  eventType: string;
  status: string;
  droppedReason: string | null;
  attempts: { attemptedAt: string }[];
}

describe.each(DATABASE_KINDS)("a filter narrowed while a replay drains on %s", (kind) => {
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

  it("begins no delivery of an excluded type once the change is answered, and logs why each was dropped", async () => {
    const { apiKey } = await server.newOrganization(`narrowed-${kind}`);
    const caller = { url: server.url, apiKey };
    const path = `/${kind}/narrowed-replay`;
    receiver.respond(path, () => ({ delayMs: 40 }));
    const since = new Date(Date.now() - 1_000).toISOString();
    // 1 + 240 reference_created events, then 20 extraction_succeeded ones.
    const parent = await createReference(caller);
    const children = await http(caller, "POST", `/v1/references/${parent.id}/children`, {
      body: { container_ids: Array.from({ length: CHILDREN }, (_, child) => containerNumber(kind, child)) },
    });
    expectStatus(children, 200);
    for (let index = 0; index < OUTCOMES; index++) {
      const written = await http(caller, "POST", `/v1/references/${parent.id}/extractions`, {
        body: { status: "succeeded" },
      });
      expectStatus(written, 201);
    }
    const events = 1 + CHILDREN + OUTCOMES;
    const endpoint = await createEndpoint(caller, { url: receiver.url(path) });
    const replayed = await http(caller, "POST", `/v1/webhooks/${endpoint.id}/replay`, { body: { since } });
    expectStatus(replayed, 202);
    expect(replayed.body).toEqual({ count: events });
    await receiver.waitForCount(path, 20, 30_000);

    const narrowed = await http(caller, "PATCH", `/v1/webhooks/${endpoint.id}`, {
      body: { event_types: ["extraction_succeeded"] },
    });
    expectStatus(narrowed, 200);
    const answeredAt = Date.now();

    const nodes = await eventually(
      async () => {
        const data = await gqlData(
          caller,
          `query($id: ID!) { webhookEndpoint(id: $id) { replay { state } deliveries(first: 500) { edges { node {
            id eventType status droppedReason attempts { attemptedAt } } } } } }`,
          { id: endpoint.id },
        );
        const found: DeliveryNode[] = data.webhookEndpoint.deliveries.edges.map(
          (edge: { node: DeliveryNode }) => edge.node,
        );
        return data.webhookEndpoint.replay === null && found.every((node) => node.status !== "PENDING") && found;
      },
      60_000,
      "the replay scheduled and every delivery settled",
    );

    // Every excluded delivery either began before the answer or was dropped unsent, with its reason.
    const excluded = nodes.filter((node) => node.eventType !== "EXTRACTION_SUCCEEDED");
    const begunAfter = excluded.filter((node) =>
      node.attempts.some((attempt) => Date.parse(attempt.attemptedAt) > answeredAt),
    );
    expect(begunAfter).toEqual([]);
    const dropped = excluded.filter((node) => node.attempts.length === 0);
    expect(dropped.length).toBeGreaterThan(0);
    expect(dropped.every((node) => node.status === "FAILED" && node.droppedReason === "FILTER_EXCLUDED")).toBe(true);
    // ...and the receiver got none but those begun before: one request per delivery with an attempt.
    const received = new Set(receiver.on(path).map((hook) => hook.webhookId));
    expect(excluded.filter((node) => received.has(node.id)).every((node) => node.attempts.length > 0)).toBe(true);

    // What the endpoint still takes went out whole, dropped by nothing.
    const taken = nodes.filter((node) => node.eventType === "EXTRACTION_SUCCEEDED");
    expect(taken).toHaveLength(OUTCOMES);
    expect(taken.every((node) => node.status === "SUCCEEDED" && node.droppedReason === null)).toBe(true);

    // REST says the same.
    const page = await listDeliveries(caller, endpoint.id, "?status=failed&limit=500");
    expect(page.find((delivery) => delivery.id === dropped[0]!.id)).toMatchObject({
      status: "failed",
      attempt_count: 0,
      dropped_reason: "filter_excluded",
    });
  }, 120_000);
});
