import { describe, expect, it } from "@jest/globals";
import { parse, type OperationDefinitionNode } from "graphql";
import { actualOperationCost } from "./actual-cost.ts";

function actual(query: string, data: unknown, requested = 1_000): number {
  const document = parse(query);
  const operation = document.definitions[0] as OperationDefinitionNode;
  return actualOperationCost(document, operation, data, requested);
}

describe("actual cost", () => {
  it("counts each field returned, once per list item, and never enters a scalar", () => {
    const query = `{ reference(id: "r") { id tags { id name } detail } }`;
    const data = {
      reference: {
        id: "r",
        tags: [
          { id: "a", name: "x" },
          { id: "b", name: "y" },
        ],
        detail: { a: { b: 1 } },
      },
    };
    // reference, id, tags, 2 × (id, name), detail
    expect(actual(query, data)).toBe(8);
  });

  it("counts a null field once and introspection not at all", () => {
    expect(actual(`{ node(id: "x") { id __typename } }`, { node: null })).toBe(1);
    expect(actual(`{ node(id: "x") { id __typename } }`, { node: { id: "x", __typename: "Tag" } })).toBe(2);
  });

  it("follows aliases and fragments, merged per response key, and is capped by the requested cost", () => {
    const query = `query { a: tags(first: 2) { ...Page } } fragment Page on TagConnection { edges { node { id ... on Tag { id name } } } }`;
    const data = { a: { edges: [{ node: { id: "1", name: "x" } }] } };
    // a, edges, node, id, name
    expect(actual(query, data)).toBe(5);
    expect(actual(query, data, 3)).toBe(3);
    expect(actual(query, null)).toBe(0);
  });
});
