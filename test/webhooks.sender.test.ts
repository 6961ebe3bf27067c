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
    const sender = new WebhookSender({ guard: new AddressGuard([]), timeoutMs: 2_000, connectionsPerOrigin: 5 });
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
      await sender.close();
    }
  });

  it("sends a request that standardwebhooks verifies with each of two secrets, and keeps 2 KB of the answer", async () => {
    const warn = jest.spyOn(console, "warn");
    const sender = new WebhookSender({
      guard: new AddressGuard(["127.0.0.0/8", "::1/128"]),
      timeoutMs: 2_000,
      connectionsPerOrigin: 5,
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
      await sender.close();
    }
  });

  it("sends over pooled keep-alive connections: 200 requests, at most 5 at a time, open at most 5 connections", async () => {
    const sender = new WebhookSender({
      guard: new AddressGuard(["127.0.0.0/8"]),
      timeoutMs: 2_000,
      connectionsPerOrigin: 5,
    });
    try {
      const secret = generateWebhookSecret();
      receiver.verifyWith("/pooled", secret);
      const before = receiver.connections;
      for (let round = 0; round < 40; round++) {
        const results = await Promise.all(
          Array.from({ length: 5 }, (_, index) => ({
            ...request(receiver.url("/pooled"), [secret]),
            webhookId: `0194a1b2-0000-7000-8000-${String(round * 5 + index).padStart(12, "0")}`,
          })).map((each) => sender.send(each)),
        );
        for (const result of results) expect(result.statusCode).toBe(200);
      }
      const hooks = receiver.on("/pooled");
      expect(hooks).toHaveLength(200);
      for (const hook of hooks) expect(hook.verifiedBy).toEqual([secret]);
      expect(receiver.connections - before).toBeLessThanOrEqual(5);
    } finally {
      await sender.close();
    }
  });

  it("a pooling sender still refuses a name that resolves to a refused address, on every connection", async () => {
    const sender = new WebhookSender({ guard: new AddressGuard([]), timeoutMs: 2_000, connectionsPerOrigin: 5 });
    try {
      const before = receiver.connections;
      // A burst (the pool would open several connections at once) and then one by one (it would reuse one).
      const burst = await Promise.all(
        Array.from({ length: 10 }, () =>
          sender.send(request(`http://localhost:${receiver.port}/rebound`, [generateWebhookSecret()])),
        ),
      );
      const sequential = [];
      for (let index = 0; index < 5; index++)
        sequential.push(
          await sender.send(request(`http://localhost:${receiver.port}/rebound`, [generateWebhookSecret()])),
        );
      for (const result of [...burst, ...sequential]) {
        expect(result.statusCode).toBeNull();
        expect(result.error).toMatch(/^target refused: localhost resolves to .* loopback address$/);
      }
      expect(receiver.on("/rebound")).toHaveLength(0);
      expect(receiver.connections - before).toBe(0);
    } finally {
      await sender.close();
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
