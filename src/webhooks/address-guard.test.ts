import { describe, expect, it } from "@jest/globals";
import { AddressGuard } from "./address-guard.ts";
import { scrub } from "./destinations/delivery-transport.ts";

describe("AddressGuard allow-lists with ports", () => {
  const guard = new AddressGuard(
    ["10.0.0.5:5672", "[fd00::/8]:4222", "192.168.0.0/16"],
    "WEBHOOK_BROKER_ALLOWED_CIDRS",
  );

  it("allows an entry's port only, and every port of an entry without one", () => {
    expect(guard.refusalReason("10.0.0.5", 5672)).toBeNull();
    expect(guard.refusalReason("10.0.0.5", 15672)).toMatch(/private/);
    expect(guard.refusalReason("10.0.0.5")).toMatch(/private/);
    expect(guard.refusalReason("fd00::1", 4222)).toBeNull();
    expect(guard.refusalReason("fd00::1", 4223)).toMatch(/uniqueLocal/);
    expect(guard.refusalReason("192.168.3.4", 1)).toBeNull();
    expect(guard.refusalReason("::ffff:10.0.0.5", 5672)).toBeNull();
  });

  it("names the setting of a malformed entry", () => {
    for (const entry of ["10.0.0.5:0", "10.0.0.5:70000", "nope", "[fd00::1]:x"])
      expect(() => new AddressGuard([entry], "WEBHOOK_BROKER_ALLOWED_CIDRS")).toThrow(/WEBHOOK_BROKER_ALLOWED_CIDRS/);
  });
});

describe("scrub", () => {
  it("removes a NATS token given as the URL's user name, raw and decoded", () => {
    const url = "nats://tok%2Fsecret@broker.example:4222";
    const text = scrub(`failed nats://tok%2Fsecret@broker.example:4222 (user tok/secret, tok%2Fsecret)`, url);
    expect(text).not.toMatch(/tok/);
  });

  it("keeps an AMQP user name (its password is the secret)", () => {
    expect(scrub("login guest refused (pw-1)", "amqp://guest:pw-1@h/")).toBe("login guest refused (****)");
  });
});
