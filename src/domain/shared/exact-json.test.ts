import { describe, expect, it } from "@jest/globals";
import { findInexactNumbers, INEXACT_NUMBER } from "./exact-json.ts";

describe("findInexactNumbers", () => {
  it("finds numbers that overflowed and integers beyond 2^53−1, in document order, with their paths", () => {
    const document = JSON.parse('{"a":1e400,"b":[1,{"c":9007199254740993}],"d":-1e999,"e":1e20}') as unknown;
    expect(findInexactNumbers(document).map(({ path, code }) => ({ path, code }))).toEqual([
      { path: ["a"], code: INEXACT_NUMBER },
      { path: ["b", 1, "c"], code: INEXACT_NUMBER },
      { path: ["d"], code: INEXACT_NUMBER },
      { path: ["e"], code: INEXACT_NUMBER },
    ]);
  });

  it("keeps what a double holds: safe integers, fractions, the smallest double", () => {
    const document = JSON.parse(
      '{"max":9007199254740991,"min":-9007199254740991,"f":0.1,"small":1.5e-300,"pi":3.141592653589793,"tiny":5e-324,"s":"1e400","n":null}',
    ) as unknown;
    expect(findInexactNumbers(document)).toEqual([]);
  });
});
