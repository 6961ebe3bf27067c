import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gql } from "./support/graphql-client.ts";
import { http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * One naming style per surface (issue 12): REST speaks snake_case (`carrier_code`), GraphQL camelCase
 * (`carrierCode`), in pointers and fields and also in the human-readable messages, although both come from the
 * same domain validation.
 */

const CREATE_REFERENCE = `
  mutation ($input: CreateReferenceInput!) { createReference(input: $input) { reference { id } } }`;
const CREATE_WEBHOOK = `
  mutation ($input: CreateWebhookEndpointInput!) { createWebhookEndpoint(input: $input) { webhookEndpoint { id } } }`;

const SNAKE_NAMES = /container_id|bill_of_lading|booking_number|carrier_code|container_ids|event_types|next_cursor/;
const CAMEL_NAMES = /containerId|billOfLading|bookingNumber|carrierCode|containerIds|eventTypes/;

describe.each(DATABASE_KINDS)("field names in error messages on %s", (kind) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(kind);
  });
  afterAll(async () => server?.close());

  it("REST names fields in snake_case", async () => {
    const badCarrier = await http(server, "POST", "/v1/references", {
      body: { container_id: "CSQU3054383", carrier_code: "X" },
    });
    expect(badCarrier.status).toBe(422);
    expect(badCarrier.body.detail).toBe("carrier_code must be a 2 to 4 letter SCAC (at /carrier_code)");
    expect(badCarrier.body.errors).toEqual([
      { pointer: "/carrier_code", code: "INVALID_FORMAT", message: "carrier_code must be a 2 to 4 letter SCAC" },
    ]);

    const twoIdentifiers = await http(server, "POST", "/v1/references", {
      body: { container_id: "CSQU3054383", booking_number: "BK-1", carrier_code: "MAEU" },
    });
    expect(twoIdentifiers.body.errors[0].message).toBe(
      "give exactly one of container_id, bill_of_lading or booking_number",
    );

    const badCheckDigit = await http(server, "POST", "/v1/references", {
      body: { container_id: "CSQU3054384", carrier_code: "MAEU" },
    });
    expect(badCheckDigit.body.detail).toBe("the check digit should be 3 (at /container_id)");

    // The detail names the field as the pointer does, array index included.
    const unknownTag = await http(server, "POST", "/v1/webhooks", {
      body: { url: "http://127.0.0.1:9/hook", tag_ids: ["0190a3c4-0000-7000-8000-000000000000"] },
    });
    expect(unknownTag.status).toBe(422);
    expect(unknownTag.body.errors[0].pointer).toBe("/tag_ids/0");
    expect(unknownTag.body.detail).toBe(`${unknownTag.body.errors[0].message} (at /tag_ids/0)`);

    const badTypes = await http(server, "POST", "/v1/webhooks", {
      body: { url: "http://127.0.0.1:9/hook", event_types: [] },
    });
    expect(badTypes.status).toBe(422);
    for (const text of [badCarrier, twoIdentifiers, badCheckDigit, badTypes].flatMap((result) => [
      result.body.detail,
      ...result.body.errors.map((error: { message: string }) => error.message),
    ])) {
      expect(text).not.toMatch(CAMEL_NAMES);
    }
  });

  it("GraphQL names fields in camelCase", async () => {
    const badCarrier = await gql(server, CREATE_REFERENCE, {
      input: { containerId: "CSQU3054383", carrierCode: "X" },
    });
    const error = badCarrier.body.errors![0]!;
    expect(error.message).toBe("carrierCode must be a 2 to 4 letter SCAC (at carrierCode)");
    expect(error.extensions!.field).toBe("input.carrierCode");

    const twoIdentifiers = await gql(server, CREATE_REFERENCE, {
      input: { containerId: "CSQU3054383", bookingNumber: "BK-1", carrierCode: "MAEU" },
    });
    expect(twoIdentifiers.body.errors![0]!.extensions!.issues[0].message).toBe(
      "give exactly one of containerId, billOfLading or bookingNumber",
    );

    const badTypes = await gql(server, CREATE_WEBHOOK, { input: { url: "http://127.0.0.1:9/hook", eventTypes: [] } });
    const badCursor = await gql(server, `{ tags(first: 1, after: "garbage") { edges { cursor } } }`);
    for (const result of [badCarrier, twoIdentifiers, badTypes, badCursor]) {
      const first = result.body.errors![0]!;
      expect(first.extensions!.code).toMatch(/VALIDATION_FAILED|INVALID_CURSOR|BAD_USER_INPUT/);
      for (const text of [first.message, ...(first.extensions!.issues ?? []).map((issue: any) => issue.message)]) {
        expect(text).not.toMatch(SNAKE_NAMES);
      }
    }
  });
});
