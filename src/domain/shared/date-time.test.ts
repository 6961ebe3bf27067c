import { describe, expect, it } from "@jest/globals";
import { parseDateTime } from "./date-time.ts";

describe("parseDateTime", () => {
  it("accepts RFC 3339's lowercase t and z, and offsets with or without a colon", () => {
    expect(parseDateTime("2026-11-22t02:49:01.665z")?.toISOString()).toBe("2026-11-22T02:49:01.665Z");
    expect(parseDateTime("2026-11-22T03:49+01:00")?.toISOString()).toBe("2026-11-22T02:49:00.000Z");
    expect(parseDateTime("2026-11-22T03:49:01+0100")?.toISOString()).toBe("2026-11-22T02:49:01.000Z");
  });

  it("refuses hour 24, minutes and seconds past 59, a missing offset and dates that do not exist", () => {
    for (const text of [
      "2026-11-22T24:00:00Z",
      "2026-11-22T24:00Z",
      "2026-11-22T23:60:00Z",
      "2026-11-22T23:59:60Z",
      "2026-11-22T02:49:01",
      "2026-02-30T00:00:00Z",
    ]) {
      expect({ text, parsed: parseDateTime(text) }).toEqual({ text, parsed: null });
    }
  });
});
