import { describe, expect, it } from "@jest/globals";
import { normalizeTagName, tagNameKey } from "./tag-name.ts";

describe("normalizeTagName", () => {
  it("trims surrounding whitespace and normalizes to NFC", () => {
    expect(normalizeTagName("  Cafe\u0301 ")).toEqual({ ok: true, name: "Café" });
  });

  it("keeps conventions such as key:value, a/b and snake_case as plain names", () => {
    for (const name of ["priority:high", "eu/north", "needs_review", "two words"]) {
      expect(normalizeTagName(name)).toEqual({ ok: true, name });
    }
  });

  it("counts code points, not UTF-16 units", () => {
    expect(normalizeTagName("😀".repeat(100)).ok).toBe(true);
    expect(normalizeTagName("😀".repeat(101))).toMatchObject({ ok: false, code: "TOO_LONG" });
  });

  it("rejects empty names, control characters and non-strings", () => {
    expect(normalizeTagName(" \t ")).toMatchObject({ ok: false, code: "TOO_SHORT" });
    expect(normalizeTagName("a\u0000b")).toMatchObject({ ok: false, code: "CONTROL_CHARACTER" });
    expect(normalizeTagName("a\u0085b")).toMatchObject({ ok: false, code: "CONTROL_CHARACTER" });
    expect(normalizeTagName(42)).toMatchObject({ ok: false, code: "INVALID_TYPE" });
  });
});

describe("tagNameKey", () => {
  it("makes names that differ only in case equal", () => {
    expect(tagNameKey("Urgent")).toBe(tagNameKey("uRGENT"));
    expect(tagNameKey("ÉTÉ")).toBe(tagNameKey("été"));
    expect(tagNameKey("ΣΟΦΟΣ")).toBe(tagNameKey("σοφος"));
  });

  it("keeps different names apart", () => {
    expect(tagNameKey("urgent")).not.toBe(tagNameKey("urgent!"));
  });
});
