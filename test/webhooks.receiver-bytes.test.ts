import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver, type Reply } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually, getDelivery, listDeliveries } from "./support/webhooks.ts";

/*
 * A receiver's answer is untrusted bytes: a NUL byte, invalid UTF-8 or a huge body is stored as a sanitized
 * excerpt (SPEC §9: the first 2 KB of the response), never as a write that fails. And one receiver's bytes never
 * decide another organization's deliveries: every delivery of every endpoint is sent once and settled, whichever
 * batch of outcomes it was written with.
 */

const REFERENCES_PER_ORGANIZATION = 8;

/** One organization each: what its endpoint answers and the excerpt the delivery API must show for it. */
const RECEIVERS: { path: string; reply: Reply; excerpt: string }[] = [
  { path: "/nul", reply: { body: "ok\0" }, excerpt: "ok\uFFFD" },
  {
    path: "/invalid-utf8",
    reply: { body: Buffer.from([0x6f, 0x6b, 0xff, 0xfe, 0xc3, 0xa9, 0xc3]) },
    excerpt: "ok\uFFFD\uFFFDé\uFFFD",
  },
  // 3-byte characters: 2,048 bytes end inside one, which is cut off whole (682 × 3 = 2,046 bytes).
  { path: "/huge", reply: { body: `${"€".repeat(40_000)}\0` }, excerpt: "€".repeat(682) },
  { path: "/healthy", reply: { body: "ok" }, excerpt: "ok" },
  { path: "/healthy-too", reply: { status: 204, body: "" }, excerpt: "" },
];

describe.each(DATABASE_KINDS)("receivers answering untrusted bytes (%s)", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, {
      // A timeout the busiest machine never reaches: a timed-out request would be sent twice, rightly.
      env: { WEBHOOK_TIMEOUT: "10s", WEBHOOK_LEASE: "15s", WEBHOOK_POLL_INTERVAL: "100ms" },
    });
  });

  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("stores a sanitized excerpt, settles every delivery and sends none twice", async () => {
    const organizations = await Promise.all(
      RECEIVERS.map(async ({ path, reply }, index) => {
        const { apiKey } = await server.newOrganization(`receiver-bytes-${index}`);
        const caller = { url: server.url, apiKey };
        receiver.respond(path, () => reply);
        const endpoint = await createEndpoint(caller, { url: receiver.url(path) });
        return { caller, endpoint, path };
      }),
    );
    // Every organization's events at once, so that their outcomes share batches.
    for (let index = 0; index < REFERENCES_PER_ORGANIZATION; index++)
      await Promise.all(organizations.map(({ caller }) => createReference(caller)));

    for (const [index, { caller, endpoint, path }] of organizations.entries()) {
      const deliveries = await eventually(
        async () => {
          const listed = await listDeliveries(caller, endpoint.id);
          const settled = listed.length === REFERENCES_PER_ORGANIZATION && listed.every((d) => d.status !== "pending");
          return settled ? listed : null;
        },
        20_000,
        `the deliveries to ${path} to settle`,
      );
      expect(deliveries.map((delivery) => [delivery.status, delivery.attempt_count])).toEqual(
        deliveries.map(() => ["succeeded", 1]),
      );
      // Each delivery reached its receiver exactly once.
      expect(
        receiver
          .on(path)
          .map((hook) => hook.webhookId)
          .sort(),
      ).toEqual(deliveries.map((delivery) => delivery.id).sort());
      const detail = await getDelivery(caller, endpoint.id, deliveries[0].id);
      expect(detail.attempts).toHaveLength(1);
      expect(detail.attempts[0]).toMatchObject({ status_code: path === "/healthy-too" ? 204 : 200, error: null });
      expect(detail.attempts[0].response_body).toBe(RECEIVERS[index]!.excerpt);
      expect(Buffer.byteLength(detail.attempts[0].response_body)).toBeLessThanOrEqual(2_048);
    }
  }, 90_000);
});
