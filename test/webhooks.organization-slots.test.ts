import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { NEVER, WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference } from "./support/webhooks.ts";

/*
 * The worker's slots are shared per organization, then per endpoint (issue 49.1): one organization whose six
 * endpoints accept every request and never answer holds at most its share of the slots (by default half of
 * WEBHOOK_CONCURRENCY), and another organization's webhooks arrive while all of those requests still hang. The
 * timeout is longer than the test: nothing of the first organization is ever answered or timed out, so an arrival
 * of the second's can only have found a free slot.
 */

const ENV = {
  WEBHOOK_TIMEOUT: "60s",
  WEBHOOK_LEASE: "70s",
  WEBHOOK_POLL_INTERVAL: "100ms",
};
const SILENT_ENDPOINTS = 6;
/**
 * Events of the silent organization: each goes to its six endpoints, 360 deliveries, more than every slot (50) and
 * more than the worker claims ahead (150): a claim limited per endpoint only gave them all of it, and the quiet
 * organization's first webhook waited for the silent requests' timeout.
 */
const SILENT_EVENTS = 60;

function containerNumber(kind: string, serial: number): string {
  const firstTen = `${kind === "sqlite" ? "OSQU" : "OPGU"}${String(serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

describe.each(DATABASE_KINDS)("an organization whose endpoints never answer on %s", (kind) => {
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

  it("holds at most its share of the slots, and another organization's webhooks arrive meanwhile", async () => {
    const silent = await server.newOrganization(`silent-${kind}`);
    const silentCaller = { url: server.url, apiKey: silent.apiKey };
    const silentPaths = Array.from({ length: SILENT_ENDPOINTS }, (_, index) => `/${kind}/silent/${index}`);
    for (const path of silentPaths) {
      receiver.respond(path, () => ({ until: NEVER }));
      await createEndpoint(silentCaller, { url: receiver.url(path) });
    }
    const parent = await createReference(silentCaller);
    const children = await http(silentCaller, "POST", `/v1/references/${parent.id}/children`, {
      body: { container_ids: Array.from({ length: SILENT_EVENTS - 1 }, (_, index) => containerNumber(kind, index)) },
    });
    expectStatus(children, 200);
    const hanging = () => silentPaths.reduce((sum, path) => sum + receiver.on(path).length, 0);
    // Its share (25 of 50) is taken, each endpoint within its own 10.
    await receiver.waitForCount(silentPaths[0]!, 4, 30_000);
    for (const path of silentPaths) await receiver.waitForCount(path, 4, 30_000);

    const quiet = await server.newOrganization(`quiet-${kind}`);
    const quietCaller = { url: server.url, apiKey: quiet.apiKey };
    const quietPath = `/${kind}/quiet`;
    await createEndpoint(quietCaller, { url: receiver.url(quietPath) });
    const latencies: number[] = [];
    for (let index = 0; index < 10; index++) {
      const began = performance.now();
      await createReference(quietCaller);
      await receiver.waitForCount(quietPath, index + 1, 30_000);
      latencies.push(performance.now() - began);
    }
    // As the receiver saw it: p50 within 200 ms, none later than a second.
    latencies.sort((a, b) => a - b);

    expect({ p50: latencies[4]! <= 200, max: latencies[9]! <= 1_000, latencies }).toMatchObject({
      p50: true,
      max: true,
    });

    // Every one of the quiet organization's webhooks arrived while the silent one's requests all hang (none is
    // ever answered), which held no more than half of the slots.
    expect(receiver.on(quietPath)).toHaveLength(10);
    expect(hanging()).toBeLessThanOrEqual(25);
    expect(hanging()).toBeGreaterThanOrEqual(SILENT_ENDPOINTS * 4);
  }, 90_000);
});
