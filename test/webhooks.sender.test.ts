import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { generateWebhookSecret } from "../src/domain/webhooks/webhook-secret.ts";
import { AddressGuard } from "../src/webhooks/address-guard.ts";
import { WebhookSender } from "../src/webhooks/webhook-sender.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";

/*
 * The sender on its own, against a real receiver: the SSRF guard at connection time (after DNS resolution),
 * signatures checked by the standardwebhooks package, and the capped response.
 */

describe("webhook sender", () => {
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
  });
  afterAll(async () => receiver?.close());

  const request = (url: string, secrets: string[]) => ({
    url,
    webhookId: "0194a1b2-0000-7000-8000-000000000001",
    body: JSON.stringify({ hello: "world" }),
    secrets,
    timestamp: new Date(),
  });

  it("refuses loopback targets at connection time, by name or by address, unless allowed", async () => {
    const sender = new WebhookSender({ guard: new AddressGuard([]), timeoutMs: 2_000, maxSocketsPerHost: 5 });
    try {
      const byName = await sender.send(request(`http://localhost:${receiver.port}/refused`, [generateWebhookSecret()]));
      expect(byName.statusCode).toBeNull();
      expect(byName.error).toMatch(/^target refused: localhost resolves to .* loopback address$/);
      const byAddress = await sender.send(
        request(`http://127.0.0.1:${receiver.port}/refused`, [generateWebhookSecret()]),
      );
      expect(byAddress.error).toBe("target refused: 127.0.0.1 is a loopback address");
      const mapped = await sender.send(
        request(`http://[::ffff:127.0.0.1]:${receiver.port}/refused`, [generateWebhookSecret()]),
      );
      expect(mapped.error).toMatch(/^target refused: .* loopback address$/);
      expect(receiver.on("/refused")).toHaveLength(0);
    } finally {
      sender.close();
    }
  });

  it("sends a request that standardwebhooks verifies with each of two secrets, and keeps 2 KB of the answer", async () => {
    const warn = jest.spyOn(console, "warn");
    const sender = new WebhookSender({
      guard: new AddressGuard(["127.0.0.0/8", "::1/128"]),
      timeoutMs: 2_000,
      maxSocketsPerHost: 5,
    });
    try {
      const [current, previous] = [generateWebhookSecret(), generateWebhookSecret()];
      receiver.verifyWith("/signed", current, previous);
      receiver.respond("/signed", () => ({ status: 201, body: "é".repeat(3_000) }));
      const result = await sender.send(request(receiver.url("/signed"), [current, previous]));
      expect(result).toMatchObject({ statusCode: 201, error: null, aborted: false });
      expect(Buffer.byteLength(result.responseBody!)).toBeLessThanOrEqual(2_048 + 2);
      const [hook] = receiver.on("/signed");
      expect(hook!.verifiedBy).toEqual([current, previous]);
      expect(hook!.headers["content-type"]).toBe("application/json");
      // Mixed IPv4 and IPv6 ranges in the allow-list produce no warnings (request-filtering-agent's would).
      expect(warn).not.toHaveBeenCalled();
    } finally {
      warn.mockRestore();
      sender.close();
    }
  });

  it("judges addresses: public unicast passes, every private kind is refused unless its range is allowed", () => {
    const guard = new AddressGuard(["10.0.0.0/8", "fd00::/8"]);
    expect(guard.refusalReason("93.184.215.14")).toBeNull();
    expect(guard.refusalReason("2606:2800:220:1:248:1893:25c8:1946")).toBeNull();
    expect(guard.refusalReason("10.20.30.40")).toBeNull();
    expect(guard.refusalReason("fd12::1")).toBeNull();
    expect(guard.refusalReason("192.168.1.1")).toMatch(/private/);
    expect(guard.refusalReason("169.254.169.254")).toMatch(/linkLocal/);
    expect(guard.refusalReason("::1")).toMatch(/loopback/);
    expect(guard.refusalReason("::ffff:192.168.1.1")).toMatch(/private/);
    expect(guard.refusalReason("0.0.0.0")).toMatch(/unspecified/);
    expect(() => new AddressGuard(["not-a-range"])).toThrow(/WEBHOOK_ALLOWED_CIDRS/);
  });
});
