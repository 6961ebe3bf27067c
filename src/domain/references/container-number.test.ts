import { describe, expect, it } from "@jest/globals";
import { checkContainerNumber, computeCheckDigit } from "./container-number.ts";

describe("ISO 6346 container numbers", () => {
  it("computes the check digit of the standard's example", () => {
    expect(computeCheckDigit("CSQU305438")).toBe(3);
  });

  it("writes a remainder of 10 as 0", () => {
    // MSKU000008: 24·1 + 30·2 + 21·4 + 32·8 + 8·512 = 4,520, and 4,520 mod 11 = 10.
    expect(computeCheckDigit("MSKU000008")).toBe(0);
    expect(checkContainerNumber("MSKU0000080")).toEqual({ ok: true, value: "MSKU0000080" });
  });

  it("upper-cases and strips spaces before validating", () => {
    expect(checkContainerNumber(" csqu 305438 3 ")).toEqual({ ok: true, value: "CSQU3054383" });
  });

  it("rejects a wrong check digit and a wrong shape", () => {
    expect(checkContainerNumber("CSQU3054384")).toMatchObject({ ok: false, code: "INVALID_CHECK_DIGIT" });
    expect(checkContainerNumber("CSQX3054383")).toMatchObject({ ok: false, code: "INVALID_FORMAT" });
    expect(checkContainerNumber("CSQU305438")).toMatchObject({ ok: false, code: "INVALID_FORMAT" });
  });
});
