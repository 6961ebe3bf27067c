import { createHmac, hash } from "node:crypto";
import { describe, expect, it } from "@jest/globals";
import { DomainError } from "./errors.ts";
import { CursorCodec } from "./cursor.ts";

const isPosition = (value: unknown): value is { i: string } => typeof (value as { i?: unknown })?.i === "string";

function codeOf(run: () => unknown): string | undefined {
  try {
    run();
  } catch (error) {
    return error instanceof DomainError ? error.code : "OTHER";
  }
  return undefined;
}

describe("CursorCodec", () => {
  const codec = new CursorCodec("secret");
  const filters = { types: ["a"], order: "asc" };

  it("round-trips a position for the same filters, whatever their key order", () => {
    const cursor = codec.encode({ i: "x" }, filters);
    expect(codec.decode(cursor, { order: "asc", types: ["a"] }, isPosition)).toEqual({ i: "x" });
  });

  it("rejects a tampered or malformed cursor", () => {
    const cursor = codec.encode({ i: "x" }, filters);
    const [payload, signature] = cursor.split(".");
    const forged = Buffer.from(JSON.stringify({ p: { i: "y" }, f: "z" })).toString("base64url");
    expect(codeOf(() => codec.decode(`${forged}.${signature}`, filters, isPosition))).toBe("INVALID_CURSOR");
    expect(codeOf(() => codec.decode(`${payload}.${signature}x`, filters, isPosition))).toBe("INVALID_CURSOR");
    expect(codeOf(() => codec.decode("not a cursor", filters, isPosition))).toBe("INVALID_CURSOR");
    expect(codeOf(() => new CursorCodec("other").decode(cursor, filters, isPosition))).toBe("INVALID_CURSOR");
  });

  it("accepts a cursor signed with HMAC-SHA256, the signature of cursors issued before SHA-3 ones", () => {
    const [payload] = codec.encode({ i: "x" }, filters).split(".");
    const hmac = createHmac("sha256", "secret").update(payload!).digest("base64url").slice(0, 22);
    expect(codec.decode(`${payload}.${hmac}`, filters, isPosition)).toEqual({ i: "x" });
    const otherKey = createHmac("sha256", "other").update(payload!).digest("base64url").slice(0, 22);
    expect(codeOf(() => codec.decode(`${payload}.${otherKey}`, filters, isPosition))).toBe("INVALID_CURSOR");
  });

  it("accepts a cursor signed with SHA3-256 of the secret and the payload, the signature before BLAKE2b", () => {
    const [payload, signature] = codec.encode({ i: "x" }, filters).split(".");
    expect(signature).toBe(hash("blake2b512", `secret${payload}`, "base64url").slice(0, 22));
    const sha3 = hash("sha3-256", `secret${payload}`, "base64url").slice(0, 22);
    expect(codec.decode(`${payload}.${sha3}`, filters, isPosition)).toEqual({ i: "x" });
    const otherKey = hash("sha3-256", `other${payload}`, "base64url").slice(0, 22);
    expect(codeOf(() => codec.decode(`${payload}.${otherKey}`, filters, isPosition))).toBe("INVALID_CURSOR");
  });

  it("accepts a cursor with the HMAC-SHA256 fingerprint of cursors issued before, for its own filters only", () => {
    const hmacFingerprint = createHmac("sha256", "secret")
      .update('{"order":"asc","types":["a"]}')
      .digest("base64url")
      .slice(0, 16);
    const payload = Buffer.from(JSON.stringify({ p: { i: "x" }, f: hmacFingerprint })).toString("base64url");
    expect(codec.encode({ i: "x" }, filters).split(".")[0]).not.toBe(payload);
    const cursor = `${payload}.${hash("sha3-256", `secret${payload}`, "base64url").slice(0, 22)}`;
    expect(codec.decode(cursor, { order: "asc", types: ["a"] }, isPosition)).toEqual({ i: "x" });
    expect(codeOf(() => codec.decode(cursor, { ...filters, order: "desc" }, isPosition))).toBe(
      "CURSOR_FILTER_MISMATCH",
    );
  });

  it("writes the payload as JSON of the position and the filters' fingerprint", () => {
    const [payload] = codec.encode({ t: "2026-11-22T12:00:00.000Z", i: "x" }, filters).split(".");
    const envelope = JSON.parse(Buffer.from(payload!, "base64url").toString("utf8")) as Record<string, unknown>;
    expect(Object.keys(envelope)).toEqual(["p", "f"]);
    expect(envelope.p).toEqual({ t: "2026-11-22T12:00:00.000Z", i: "x" });
    expect(envelope.f).toMatch(/^[A-Za-z0-9_-]{16}$/);
  });

  it("round-trips positions of any length and any text, each encoded on its own", () => {
    const positions = [
      { i: "é☃😀" },
      { i: "x".repeat(1021) },
      { i: "y".repeat(5000) },
      { i: "é".repeat(600) },
      { i: "" },
    ];
    const cursors = positions.map((position) => codec.encode(position, filters));
    cursors.forEach((cursor, index) => {
      expect(codec.decode(cursor, filters, isPosition)).toEqual(positions[index]);
      const [payload] = cursor.split(".");
      expect(JSON.parse(Buffer.from(payload!, "base64url").toString("utf8")).p).toEqual(positions[index]);
    });
  });

  it("rejects a cursor reused with other filters", () => {
    const cursor = codec.encode({ i: "x" }, filters);
    expect(codeOf(() => codec.decode(cursor, { ...filters, order: "desc" }, isPosition))).toBe(
      "CURSOR_FILTER_MISMATCH",
    );
  });
});
