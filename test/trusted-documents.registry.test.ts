import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gql, gqlData } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * The registry of trusted documents through its API: REST (/v1/trusted-documents) and GraphQL
 * (registerTrustedDocuments, trustedDocuments), thin over one service. Registration is idempotent, all or nothing,
 * decided by the database when requests race, and closed to trusted-documents-only keys.
 */

const idOf = (text: string) => `sha256:${createHash("sha256").update(text).digest("hex")}`;
const bareHexOf = (text: string) => idOf(text).slice("sha256:".length);

describe.each(DATABASE_KINDS)("the trusted documents registry on %s", (kind) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(kind);
  });
  afterAll(async () => {
    await server?.close();
  });

  it("registers a manifest once, lists it and reads one document, over REST and GraphQL", async () => {
    const first = "query First { tags(first: 1) { edges { node { id } } } }";
    const second = "query Second { __typename } query { __typename }";
    const manifest = { [bareHexOf(first)]: first, [idOf(second)]: second };
    const registered = await http(server, "POST", "/v1/trusted-documents", { body: manifest });
    expectStatus(registered, 200);
    expect(registered.body).toEqual({
      registered: 2,
      already_registered: 0,
      data: [
        { document_id: idOf(first), operation_names: ["First"], created_at: expect.any(String) },
        { document_id: idOf(second), operation_names: ["Second", null], created_at: expect.any(String) },
      ],
    });
    const again = await gqlData(
      server,
      `mutation ($manifest: JSONObject!) {
        registerTrustedDocuments(input: { manifest: $manifest }) { registered documents { documentId createdAt } }
      }`,
      { manifest },
    );
    expect(again.registerTrustedDocuments.registered).toBe(0);
    expect(again.registerTrustedDocuments.documents.map((document: any) => document.createdAt)).toEqual(
      registered.body.data.map((document: any) => document.created_at),
    );

    const page = await http(server, "GET", "/v1/trusted-documents?limit=1");
    expectStatus(page, 200);
    expect(page.body.data).toHaveLength(1);
    const next = await http(server, "GET", `/v1/trusted-documents?limit=1&cursor=${page.body.next_cursor}`);
    const listed = [...page.body.data, ...next.body.data].map((document: any) => document.document);
    expect(listed.sort()).toEqual([first, second].sort());
    const connection = await gqlData(server, "{ trustedDocuments(first: 10) { edges { node { documentId } } } }");
    expect(connection.trustedDocuments.edges).toHaveLength(2);
    const one = await http(server, "GET", `/v1/trusted-documents/${idOf(first)}`);
    expect(one.body).toMatchObject({ document_id: idOf(first), document: first });
    expect((await http(server, "GET", `/v1/trusted-documents/${idOf("nothing")}`)).status).toBe(404);
    const byGraphql = await gql(server, "query ($id: String!) { trustedDocument(documentId: $id) { document } }", {
      id: idOf(second),
    });
    expect(byGraphql.body.data?.trustedDocument.document).toBe(second);
  });

  it("refuses a whole manifest for one bad entry, with a pointer to it, on both surfaces", async () => {
    const good = "{ __typename }";
    const manifest = {
      [idOf(good)]: good,
      [idOf("{ other }")]: "{ __typename }",
      [idOf("type Query { a: Int }")]: "type Query { a: Int }",
      sha1abc: "{ __typename }",
    };
    const rest = await http(server, "POST", "/v1/trusted-documents", { body: manifest });
    expect(rest.status).toBe(422);
    expect(rest.body.code).toBe("VALIDATION_FAILED");
    expect(rest.body.errors).toEqual([
      { pointer: `/${idOf("{ other }")}`, code: "DOCUMENT_ID_MISMATCH", message: expect.any(String) },
      { pointer: `/${idOf("type Query { a: Int }")}`, code: "INVALID_DOCUMENT", message: expect.any(String) },
      { pointer: "/sha1abc", code: "INVALID_DOCUMENT_ID", message: expect.any(String) },
    ]);
    const graphql = await gql(
      server,
      "mutation ($manifest: JSONObject!) { registerTrustedDocuments(input: { manifest: $manifest }) { registered } }",
      { manifest },
    );
    expect(graphql.body.errors?.[0]?.extensions).toMatchObject({
      code: "VALIDATION_FAILED",
      field: `input.manifest.${idOf("{ other }")}`,
    });
    // Nothing of it was registered.
    expect((await http(server, "GET", `/v1/trusted-documents/${idOf(good)}`)).status).toBe(404);
    expect((await http(server, "POST", "/v1/trusted-documents", { body: {} })).status).toBe(422);
    expect((await http(server, "POST", "/v1/trusted-documents", { body: [good] })).status).toBe(422);
  });

  it("is closed to a trusted-documents-only key, which may not widen what it runs", async () => {
    const key = await server.app.services.organizations.createApiKey(server.organizationId, {
      trustedDocumentsOnly: true,
    });
    const text = "{ __typename }";
    const refused = await http(server, "POST", "/v1/trusted-documents", {
      body: { [idOf(text)]: text },
      apiKey: key.key,
    });
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("FORBIDDEN");
  });

  it("lets the database decide between registrations of the same documents sent at once", async () => {
    const texts = Array.from({ length: 20 }, (_, index) => `query Race${index} { __typename }`);
    const manifest = Object.fromEntries(texts.map((text) => [idOf(text), text]));
    const results = await Promise.all(
      Array.from({ length: 8 }, () => http(server, "POST", "/v1/trusted-documents", { body: manifest })),
    );
    for (const result of results) expectStatus(result, 200);
    expect(results.reduce((sum, result) => sum + Number(result.body.registered), 0)).toBe(texts.length);
    const createdAt = new Set(
      results.flatMap((result) => result.body.data.map((d: any) => `${d.document_id} ${d.created_at}`)),
    );
    expect(createdAt.size).toBe(texts.length);
  });
});
