import { describe, expect, it } from "@jest/globals";
import { findUnderflowedNumbers, markUnderflowedNumbers } from "./underflow-scanner.ts";

describe("findUnderflowedNumbers", () => {
  it("finds the non-zero numbers that parse to 0, with their paths, wherever they are", () => {
    const text =
      '{"a":1e-400,"b":[0,{"c\\"d":-2.5E-400}],"s":"1e-400 \\" ]","e":[[1],[2,0.' + "0".repeat(330) + '1]],"f":1e-10}';
    expect(findUnderflowedNumbers(text)).toEqual([["a"], ["b", 1, 'c"d'], ["e", 1, 1]]);
  });

  it("leaves zeros written as zeros and the numbers a double holds", () => {
    expect(findUnderflowedNumbers('{"z":0,"y":0e-400,"x":-0.000e-999,"w":5e-324,"v":[1.5e-300]}')).toEqual([]);
  });

  it("finds a whole text that is one such number", () => {
    expect(findUnderflowedNumbers("1e-400")).toEqual([[]]);
    expect(markUnderflowedNumbers("1e-400", 0)).toBeNaN();
  });

  it("marks them as NaN in the parsed value and leaves the rest as parsed", () => {
    const text = '{"a":1e-400,"b":[0,1e-999],"c":0}';
    expect(markUnderflowedNumbers(text, JSON.parse(text))).toEqual({ a: Number.NaN, b: [0, Number.NaN], c: 0 });
  });
});
