import { describe, expect, it } from "@jest/globals";
import { documentIdOf, documentIdOfManifestKey, documentIdOfSha256Hash, isDocumentId } from "./document-id.ts";

describe("document ids", () => {
  it("are GraphQL-over-HTTP's SHA256 hex document identifiers of the text", () => {
    // The examples of GraphQL-over-HTTP, Appendix A.
    expect(documentIdOf("query ($id: ID!) {\n  user(id: $id) {\n    name\n  }\n}")).toBe(
      "sha256:7dba4bd717b41f10434822356a93c32b1fb4907b983e854300ad839f84cdcd6e",
    );
    expect(documentIdOf("query($id:ID!){user(id:$id){name}}")).toBe(
      "sha256:71f7dc5758652baac68e4a10c50be732b741c892ade2883a99358f52b555286b",
    );
  });

  it("accept only sha256: and 64 lower-case hex digits", () => {
    const hex = "a".repeat(64);
    expect(isDocumentId(`sha256:${hex}`)).toBe(true);
    expect(isDocumentId(`sha256:${hex.toUpperCase()}`)).toBe(false);
    expect(isDocumentId(`sha256:${hex}0`)).toBe(false);
    expect(isDocumentId(hex)).toBe(false);
    expect(isDocumentId(`x-custom:${hex}`)).toBe(false);
    expect(isDocumentId(42)).toBe(false);
  });

  it("read a manifest's keys with or without the prefix, and Apollo's bare hash", () => {
    const hex = "0123456789abcdef".repeat(4);
    expect(documentIdOfManifestKey(hex)).toBe(`sha256:${hex}`);
    expect(documentIdOfManifestKey(`sha256:${hex}`)).toBe(`sha256:${hex}`);
    expect(documentIdOfManifestKey("86f01e23de1c770cabbc35b2d87f2e5fd7557b6f")).toBeNull(); // a SHA-1
    expect(documentIdOfSha256Hash(hex)).toBe(`sha256:${hex}`);
    expect(documentIdOfSha256Hash(`sha256:${hex}`)).toBeNull();
    expect(documentIdOfSha256Hash(undefined)).toBeNull();
  });
});
