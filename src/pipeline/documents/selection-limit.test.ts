import { describe, expect, it } from "@jest/globals";
import { parse } from "graphql";
import { countExpandedSelections } from "./selection-limit.ts";

/** `{ ...F0 } fragment F0 on Query { ...F1 ...F1 } … fragment F<n> on Query { __typename }` */
function doublingFragments(count: number): string {
  const fragments = Array.from({ length: count }, (_, i) => `fragment F${i} on Query { ...F${i + 1} ...F${i + 1} }`);
  return `{ ...F0 } ${fragments.join(" ")} fragment F${count} on Query { __typename }`;
}

const countsOf = (text: string) => [...countExpandedSelections(parse(text)).values()];

describe("countExpandedSelections", () => {
  it("counts fields, spreads and inline fragments, nested ones included", () => {
    expect(countsOf(`{ a { b c { d } } ... on Query { e } }`)).toEqual([6]);
    expect(countsOf(`query A { a } query B { a { ...X } } fragment X on T { b c }`)).toEqual([1, 4]);
  });

  it("counts each spread of a fragment, without walking the fragment again", () => {
    // Fragment i is 2 spreads plus twice fragment i + 1: c(n) = 1, c(i) = 2 + 2 c(i + 1) = 3 * 2^(n - i) - 2;
    // the operation adds its own spread of F0. Walking the expansion would visit 3.5e18 selections.
    expect(countsOf(doublingFragments(60))).toEqual([3 * 2 ** 60 - 1]);
    expect(countsOf(doublingFragments(3))).toEqual([23]);
  });

  it("counts a document with more fragments than a count can hold, and says it is over any limit", () => {
    const [count] = countsOf(doublingFragments(2_000));
    expect(count).toBe(Infinity);
  });

  it("counts a spread of an unknown fragment, or of a fragment in a cycle, as the spread alone", () => {
    expect(countsOf(`{ ...Missing a }`)).toEqual([2]);
    expect(countsOf(`{ ...A } fragment A on Query { a ...B } fragment B on Query { b ...A }`)).toEqual([5]);
  });
});
