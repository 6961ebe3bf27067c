import { describe, expect, it } from "@jest/globals";
import { storableText } from "./attempt-text.ts";

describe("storableText", () => {
  it("keeps ordinary text and null as they are", () => {
    expect(storableText(null)).toBeNull();
    expect(storableText("")).toBe("");
    expect(storableText("ok — très bien 🚢")).toBe("ok — très bien 🚢");
  });

  it("replaces NUL and unpaired surrogates with U+FFFD", () => {
    expect(storableText("ok\0")).toBe("ok\uFFFD");
    expect(storableText("a\uD800b\uDC00c")).toBe("a\uFFFDb\uFFFDc");
  });

  it("cuts to the byte limit on a code point boundary", () => {
    expect(storableText("abcdef", 4)).toBe("abcd");
    // "€" is 3 bytes: 7 bytes hold two of them, not two and a third of one.
    expect(storableText("€€€", 7)).toBe("€€");
    // "🚢" is 4 bytes (a surrogate pair in the string): never half of it.
    expect(storableText("a🚢", 4)).toBe("a");
    expect(storableText("a🚢", 5)).toBe("a🚢");
    // A replacement is 3 bytes too, and counts against the limit.
    expect(storableText("\0\0", 4)).toBe("\uFFFD");
  });
});
