import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Outcome } from "./support/drivers.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { graphqlWebhookDriver, restWebhookDriver, type WebhookDriver } from "./support/webhook-drivers.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createReference, eventually } from "./support/webhooks.ts";

/*
 * The behaviour suite of webhooks (webhook endpoints, secrets, test events, deliveries and re-sends): every
 * scenario runs through REST and through GraphQL, on SQLite and on PostgreSQL, against a real receiver that
 * verifies each signature.
 */

const SURFACES = [
  ["rest", restWebhookDriver],
  ["graphql", graphqlWebhookDriver],
] as const;

const MISSING_ID = "01900000-0000-7000-8000-000000000000";

function value<T>(outcome: Outcome<T>): T {
  if (!outcome.ok) throw new Error(`expected success, got ${outcome.code} ${JSON.stringify(outcome.body)}`);
  return outcome.value;
}

function failure<T>(outcome: Outcome<T>): { code: string; fields: string[] } {
  if (outcome.ok) throw new Error(`expected failure, got ${JSON.stringify(outcome.value)}`);
  return outcome;
}

describe.each(DATABASE_KINDS)("webhooks on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, {
      env: { WEBHOOK_RETRY_SCHEDULE: "0s,100ms", WEBHOOK_POLL_INTERVAL: "50ms" },
    });
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  describe.each(SURFACES)("through %s", (surface, makeDriver) => {
    let api: WebhookDriver;
    beforeAll(() => {
      api = makeDriver(server);
    });
    let paths = 0;
    const newPath = () => `/${kind}-${surface}-${++paths}`;

    it("creates, reads, lists, updates and deletes endpoints; the secret is shown only at creation", async () => {
      const path = newPath();
      const { endpoint, secret } = value(
        await api.create({ url: receiver.url(path), eventTypes: ["reference_created"], description: "ops" }),
      );
      expect(secret).toMatch(/^whsec_/);
      expect(endpoint).toMatchObject({
        url: receiver.url(path),
        eventTypes: ["reference_created"],
        description: "ops",
        enabled: true,
      });
      expect(value(await api.get(endpoint.id))).toEqual(endpoint);
      expect(JSON.stringify(value(await api.get(endpoint.id)))).not.toContain("whsec_");

      const other = value(await api.create({ url: receiver.url(newPath()) })).endpoint;
      expect(other.eventTypes).toBeNull();
      const firstPage = value(await api.list({ limit: 1 }));
      expect(firstPage.items.map((item) => item.id)).toEqual([other.id]);
      const secondPage = value(await api.list({ limit: 1, cursor: firstPage.nextCursor! }));
      expect(secondPage.items.map((item) => item.id)).toEqual([endpoint.id]);

      const updated = value(await api.update(endpoint.id, { enabled: false, eventTypes: null, description: "paused" }));
      expect(updated).toMatchObject({ id: endpoint.id, enabled: false, eventTypes: null, description: "paused" });

      expect(value(await api.remove(endpoint.id))).toBe(true);
      expect(failure(await api.get(endpoint.id)).code).toBe("NOT_FOUND");
      expect(failure(await api.remove(endpoint.id)).code).toBe("NOT_FOUND");
      expect(failure(await api.update(MISSING_ID, { enabled: true })).code).toBe("NOT_FOUND");
    });

    it("refuses invalid endpoints with a pointer to the field, and saves nothing", async () => {
      const before = value(await api.list({ limit: 500 })).items.length;
      for (const [input, field] of [
        [{ url: "ftp://example.com/hook" }, "url"],
        [{ url: "https://user:pw@example.com/hook" }, "url"],
        [{ url: "http://10.0.0.1/hook" }, "url"],
        [{ url: receiver.url(newPath()), description: "x".repeat(501) }, "description"],
        [{ url: receiver.url(newPath()), eventTypes: [] }, "eventTypes"],
      ] as const) {
        const error = failure(await api.create(input));
        expect({ input, code: error.code }).toEqual({ input, code: "VALIDATION_FAILED" });
        expect(error.fields).toContain(field);
      }
      expect(value(await api.list({ limit: 500 })).items).toHaveLength(before);
    });

    it("delivers lifecycle events and test events, signed, and lists and re-sends deliveries", async () => {
      const path = newPath();
      const { endpoint, secret } = value(await api.create({ url: receiver.url(path) }));
      receiver.verifyWith(path, secret);

      const reference = await createReference(server);
      const [created] = await receiver.waitForCount(path, 1);
      expect(created!.verifiedBy).toEqual([secret]);
      expect(created!.json).toMatchObject({ type: "reference_created", reference_id: reference.id });

      const test = value(await api.sendTest(endpoint.id));
      expect(test.endpointId).toBe(endpoint.id);
      const received = await receiver.waitForCount(path, 2);
      expect(received[1]!.webhookId).toBe(test.id);

      const deliveries = await eventually(async () => {
        const page = value(await api.listDeliveries(endpoint.id));
        return page.items.length === 2 && page.items.every((item) => item.status === "succeeded") && page;
      });
      // Newest first.
      expect(deliveries.items.map((item) => item.id)).toEqual([test.id, created!.webhookId]);
      expect(deliveries.items[1]).toMatchObject({ eventType: "reference_created", attemptCount: 1 });
      const firstOnly = value(await api.listDeliveries(endpoint.id, { limit: 1 }));
      expect(firstOnly.items.map((item) => item.id)).toEqual([test.id]);
      expect(
        value(await api.listDeliveries(endpoint.id, { limit: 1, cursor: firstOnly.nextCursor! })).items[0]!.id,
      ).toBe(created!.webhookId);

      const resent = value(await api.resend(endpoint.id, created!.webhookId));
      expect(resent.id).toBe(created!.webhookId);
      const again = await receiver.waitForCount(path, 3);
      expect(again[2]!.webhookId).toBe(created!.webhookId);
      expect(again[2]!.body).toBe(created!.body);
      expect(failure(await api.resend(endpoint.id, MISSING_ID)).code).toBe("NOT_FOUND");
    });

    it("signs with the new and the previous secret after a rotation", async () => {
      const path = newPath();
      const { endpoint, secret: first } = value(await api.create({ url: receiver.url(path) }));
      const rotated = value(await api.rotateSecret(endpoint.id));
      expect(rotated.secret).toMatch(/^whsec_/);
      expect(rotated.secret).not.toBe(first);
      expect(rotated.endpoint.previousSecretExpiresAt).not.toBeNull();
      receiver.verifyWith(path, first, rotated.secret);

      value(await api.sendTest(endpoint.id));
      const [delivered] = await receiver.waitForCount(path, 1);
      expect([...delivered!.verifiedBy].sort()).toEqual([first, rotated.secret].sort());
      expect(failure(await api.rotateSecret(MISSING_ID)).code).toBe("NOT_FOUND");
    });
  });
});
