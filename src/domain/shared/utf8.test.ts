import { describe, expect, it } from "@jest/globals";
import { utf8Bytes } from "./utf8.ts";

describe("utf8Bytes", () => {
  it("encodes text of one- to four-byte characters, with its suffix, as Buffer.from does", () => {
    const text = `{"name":"dïrect-☃-😀"}`;
    expect(utf8Bytes(text, "\n").equals(Buffer.from(`${text}\n`))).toBe(true);
    expect(utf8Bytes(text).equals(Buffer.from(text))).toBe(true);
  });

  it("hands out a Buffer of its own: a later call does not change an earlier answer", () => {
    const first = utf8Bytes("first answer");
    utf8Bytes("a second, longer answer");
    expect(first.toString()).toBe("first answer");
  });

  it("encodes text larger than its area the same way", () => {
    const text = "😀é".repeat(100_000);
    expect(utf8Bytes(text, "\n").equals(Buffer.from(`${text}\n`))).toBe(true);
  });
});
