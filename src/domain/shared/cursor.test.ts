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

  it("rejects a cursor reused with other filters", () => {
    const cursor = codec.encode({ i: "x" }, filters);
    expect(codeOf(() => codec.decode(cursor, { ...filters, order: "desc" }, isPosition))).toBe(
      "CURSOR_FILTER_MISMATCH",
    );
  });
});
