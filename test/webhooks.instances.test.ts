import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { http } from "./support/http.ts";
import { startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, eventually } from "./support/webhooks.ts";

/*
 * Several instances on one PostgreSQL database share the delivery work: 1,000 events written
 * through two servers reach one receiver, every one of them, and no webhook-id arrives twice while both
 * instances stay healthy (claims are leased with FOR UPDATE SKIP LOCKED).
 */

const EVENTS = 1_000;

function containerNumber(serial: number): string {
  const firstTen = `TGHU${String(serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}
const ENV = { WEBHOOK_POLL_INTERVAL: "100ms" };

describe("two instances on one PostgreSQL database", () => {
  let first: TestServer;
  let second: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    first = await startTestServer("postgres", { env: ENV });
    second = await startInstanceOn(first, { env: ENV });
  });
  afterAll(async () => {
    await second?.close();
    await first?.close();
    await receiver?.close();
  });

  async function sentBy(server: TestServer): Promise<number> {
    const metrics = (await http(server, "GET", "/metrics", { apiKey: null })).body as string;
    const match = /reftrail_webhook_deliveries_sent_total\{event_type="reference_created"\} (\d+)/.exec(metrics);
    return Number(match?.[1] ?? 0);
  }

  it("delivers 1,000 events once each, with both instances sending", async () => {
    const endpoint = await createEndpoint(first, { url: receiver.url("/shared") });
    receiver.verifyWith("/shared", endpoint.secret);

    // 40 bills of lading, each reporting 24 containers (one `reference_created` per child, 24 per transaction):
    // 1,000 events in bursts, written alternately through the two instances by four writers. Each instance is
    // woken by its own commits and finds the other's by polling.
    const parents = 40;
    const childrenPerParent = (EVENTS - parents) / parents;
    let next = 0;
    const writer = async () => {
      while (next < parents) {
        const index = next++;
        const server = index % 2 === 0 ? first : second;
        const parent = await http(server, "POST", "/v1/references", {
          body: { bill_of_lading: `BL-SHARED-${index}`, carrier_code: "MAEU" },
        });
        expect(parent.status).toBe(201);
        const containerIds = Array.from({ length: childrenPerParent }, (_, child) =>
          containerNumber(index * childrenPerParent + child),
        );
        const other = index % 2 === 0 ? second : first;
        const children = await http(other, "POST", `/v1/references/${parent.body.reference.id}/children`, {
          body: { container_ids: containerIds },
        });
        expect(children.status).toBe(200);
      }
    };
    await Promise.all(Array.from({ length: 4 }, writer));

    const hooks = await receiver.waitForCount("/shared", EVENTS, 60_000);
    // Every send is counted by the instance that made it once its answer is in: when the counts cover every
    // delivery, a duplicate (two instances sending one delivery) has reached the receiver too.
    await eventually(
      async () => (await sentBy(first)) + (await sentBy(second)) >= EVENTS,
      30_000,
      "every send counted",
    );
    const received = receiver.on("/shared");
    expect(received).toHaveLength(EVENTS);
    expect(new Set(received.map((hook) => hook.webhookId)).size).toBe(EVENTS);
    expect(new Set(received.map((hook) => hook.json.id)).size).toBe(EVENTS);
    for (const hook of hooks) expect(hook.verifiedBy).toEqual([endpoint.secret]);

    const [byFirst, bySecond] = [await sentBy(first), await sentBy(second)];
    expect(byFirst + bySecond).toBe(EVENTS);
    expect(byFirst).toBeGreaterThan(0);
    expect(bySecond).toBeGreaterThan(0);
  }, 180_000);
});

describe("an instance that did not write the event", () => {
  let writer: TestServer;
  let sender: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    // The writer sends nothing; the sender would find the delivery by polling only after a minute.
    writer = await startTestServer("postgres", { env: { WEBHOOK_WORKER: "off" } });
    sender = await startInstanceOn(writer, { env: { WEBHOOK_POLL_INTERVAL: "60s" } });
  });
  afterAll(async () => {
    await sender?.close();
    await writer?.close();
    await receiver?.close();
  });

  it("is woken by the commit (LISTEN/NOTIFY) and delivers long before its next poll", async () => {
    const endpoint = await createEndpoint(writer, { url: receiver.url("/elsewhere") });
    receiver.verifyWith("/elsewhere", endpoint.secret);
    // The sender's first poll (at start) has passed: the endpoint did not exist then.
    const created = await http(writer, "POST", "/v1/references", {
      body: { container_id: containerNumber(999_001), carrier_code: "MAEU" },
    });
    expect(created.status).toBe(201);

    const [hook] = await receiver.waitForCount("/elsewhere", 1, 20_000);
    expect(hook!.json.id).toBeDefined();
    expect(hook!.json.type).toBe("reference_created");
    expect(hook!.json.reference_id).toBe(created.body.reference.id);
    expect(hook!.verifiedBy).toEqual([endpoint.secret]);
  }, 60_000);
});
