import { describe, expect, it } from "@jest/globals";
import { buildSchema, parse, validate } from "graphql";
import { graphqlValidationRules } from "./limits.ts";

const schema = buildSchema(`type Query { name: String, self: Query }`);
const config = { graphqlMaxDepth: 12, graphqlMaxAliases: 30, graphqlMaxSelections: 10_000 };

/** Fragments on `type`, each spreading the next twice, the last one selecting `leaf`. */
function doublingFragments(count: number, type: string, leaf: string): string {
  return Array.from({ length: count }, (_, i) => `fragment F${i} on ${type} { ...F${i + 1} ...F${i + 1} }`)
    .join(" ")
    .concat(` fragment F${count} on ${type} { ${leaf} }`);
}

const limitsOf = (text: string, maxSelections = Infinity) =>
  validate(schema, parse(text), graphqlValidationRules({ ...config, graphqlMaxSelections: maxSelections })).map(
    (error) => error.extensions.limit,
  );

/*
 * The depth, alias and introspection rules measure each fragment once. A rule that followed every spread would
 * walk 2^50 selections here and never finish (the test would time out). The selection limit is lifted for these
 * (Infinity) unless a test is about it.
 */
describe("the document rules on fragments spread twice, fifty deep", () => {
  it("refuse the operation for its selections alone, measuring nothing else", () => {
    const nested = `${"self { ".repeat(12)}a: name${" }".repeat(12)}`;
    expect(limitsOf(`{ ...F0 } ${doublingFragments(50, "Query", nested)}`, 10_000)).toEqual([
      { kind: "selections", maximum: 10_000, actual: null },
    ]);
  });

  it("measure the introspection nesting of the one fragment at the bottom", () => {
    const deep = `fields { type { fields { type { fields { name } } } } }`;
    expect(limitsOf(`{ __schema { types { ...F0 } } } ${doublingFragments(50, "__Type", deep)}`)).toEqual([
      { kind: "introspection-depth", maximum: 2, actual: 3 },
    ]);
    expect(limitsOf(`{ __schema { types { ...F0 } } } ${doublingFragments(50, "__Type", "fields { name }")}`)).toEqual(
      [],
    );
  });

  it("measure depth and aliases through the fragments", () => {
    const nested = `${"self { ".repeat(12)}name${" }".repeat(12)}`;
    expect(limitsOf(`{ ...F0 } ${doublingFragments(50, "Query", nested)}`)).toEqual([
      { kind: "depth", maximum: 12, actual: 13 },
    ]);
    expect(limitsOf(`{ ...F0 } ${doublingFragments(50, "Query", "a: name")}`)).toEqual([
      { kind: "aliases", maximum: 30, actual: 2 ** 50 },
    ]);
  });
});
