import { describe, expect, it } from "@jest/globals";
import { graphqlDocumentReader } from "./graphql-document-reader.ts";

describe("the registry's document reader", () => {
  it("gives the operation names of an executable document, null for an anonymous one", () => {
    expect(graphqlDocumentReader.operationNames("query A { a } fragment F on T { b } mutation { c }")).toEqual({
      names: ["A", null],
    });
  });

  it("refuses what could never run: a syntax error, type definitions, fragments alone, a stack overflow", () => {
    expect(graphqlDocumentReader.operationNames("query {")).toEqual({ problem: expect.stringMatching(/Syntax Error/) });
    expect(graphqlDocumentReader.operationNames("type Query { a: Int }")).toEqual({
      problem: expect.stringMatching(/type system/),
    });
    expect(graphqlDocumentReader.operationNames("fragment F on T { a }")).toEqual({ problem: "it holds no operation" });
    const deep = `${"{ a ".repeat(100_000)}${"}".repeat(100_000)}`;
    expect(graphqlDocumentReader.operationNames(deep)).toEqual({ problem: expect.any(String) });
  });
});
