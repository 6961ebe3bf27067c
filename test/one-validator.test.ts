import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gql } from "./support/graphql-client.ts";
import { http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { createReference } from "./support/webhooks.ts";

/*
 * One meaning, one validator (issue 10): REST route schemas check shape only, and the domain judges every value,
 * so the same input gets the same code on both surfaces. Before, REST's JSON schema refused what the domain
 * accepts (a padded 100-character tag name) and answered malformed tag ids and oversized container reports with
 * schema errors of its own, while GraphQL had no limit on a container report at all.
 */

describe.each(DATABASE_KINDS)("one validator for REST and GraphQL on %s", (kind) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(kind);
  });
  afterAll(async () => {
    await server?.close();
  });

  it("accepts a tag name that is 100 characters once trimmed, on both surfaces", async () => {
    const name = (suffix: string) => `  ${"n".repeat(99)}${suffix}  `;
    const rest = await http(server, "POST", "/v1/tags", { body: { name: name("r") } });
    expect(rest.status).toBe(201);
    expect(rest.body.name).toBe(`${"n".repeat(99)}r`);
    const graphql = await gql(
      server,
      `mutation ($name: String!) { createTag(input: { name: $name }) { tag { name } } }`,
      {
        name: name("g"),
      },
    );
    expect(graphql.body.errors).toBeUndefined();
    expect(graphql.body.data.createTag.tag.name).toBe(`${"n".repeat(99)}g`);
  });

  it("refuses a malformed tag id in a tag entry with the same code on both surfaces", async () => {
    const rest = await http(server, "POST", "/v1/references", {
      body: { container_id: "CSQU3054383", carrier_code: "MAEU", tags: [{ id: "not-a-uuid" }] },
    });
    expect(rest.status).toBe(422);
    expect(rest.body.errors).toEqual([expect.objectContaining({ pointer: "/tags/0/id", code: "INVALID_ID" })]);
    const graphql = await gql(
      server,
      `mutation ($tags: [TagEntryInput!]) {
        createReference(input: { containerId: "CSQU3054383", carrierCode: "MAEU", tags: $tags }) { reference { id } }
      }`,
      { tags: [{ id: "not-a-uuid" }] },
    );
    expect(graphql.body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED" });
    expect(JSON.stringify(graphql.body.errors?.[0]?.extensions)).toContain("INVALID_ID");
  });

  it("limits a container report to 500 numbers on both surfaces, before anything is written", async () => {
    const parent = await createReference(server);
    const containerIds = Array.from({ length: 501 }, () => "CSQU3054383");
    const rest = await http(server, "POST", `/v1/references/${parent.id}/children`, {
      body: { container_ids: containerIds },
    });
    expect(rest.status).toBe(422);
    expect(rest.body).toMatchObject({ code: "LIMIT_EXCEEDED" });
    expect(rest.body.errors).toEqual([expect.objectContaining({ pointer: "/container_ids", code: "LIMIT_EXCEEDED" })]);
    const graphql = await gql(
      server,
      `mutation ($input: ReportChildContainersInput!) { reportChildContainers(input: $input) { children { id } } }`,
      { input: { referenceId: parent.id, containerIds } },
    );
    expect(graphql.body.errors?.[0]?.extensions).toMatchObject({
      code: "LIMIT_EXCEEDED",
      field: "input.containerIds",
    });
    const children = await http(server, "GET", `/v1/references?parent_reference_id=${parent.id}`);
    expect(children.body.data).toEqual([]);
  });
});
