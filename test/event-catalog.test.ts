import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gqlData } from "./support/graphql-client.ts";
import { http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, type Caller } from "./support/webhooks.ts";
import { withLabel } from "./support/with-label.ts";

/*
 * The event catalog (SPEC §9.3): GET /v1/event-types gives each event type's delivered body schema, the OpenAPI
 * document's `webhooks` section has the same, and the GraphQL enum describes each type in the same words. Every
 * body a real receiver gets (signatures verified with the independent `standardwebhooks` package) must validate
 * against both schemas, compiled by ajv in strict mode (union types allowed: `["string", "null"]`), so a schema
 * that ajv would have to guess at fails too.
 */

const ENV = { WEBHOOK_RETRY_SCHEDULE: "0s,150ms", WEBHOOK_TIMEOUT: "2s", WEBHOOK_POLL_INTERVAL: "50ms" };
const TYPES = [
  "reference_created",
  "reference_deactivated",
  "reference_reactivated",
  "reference_update_created",
  "extraction_succeeded",
  "extraction_failed",
  "estimated_departure_changed",
  "estimated_arrival_changed",
];

interface CatalogEntry {
  readonly type: string;
  readonly description: string;
  readonly schema: object;
}
type WebhooksSection = Record<
  string,
  {
    post: {
      parameters: { name: string; in: string; required: boolean }[];
      requestBody: { content: Record<string, { schema: object }> };
      responses: Record<string, unknown>;
    };
  }
>;

const addFormatsPlugin = addFormats as unknown as (ajv: Ajv2020) => Ajv2020;
function strictCompile(schema: object): ValidateFunction {
  return addFormatsPlugin(new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true })).compile(schema);
}

function errorsOf(validate: ValidateFunction, body: unknown): unknown[] {
  return validate(body) ? [] : (validate.errors ?? []);
}

describe.each(DATABASE_KINDS)("the event catalog on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  let catalog: CatalogEntry[];
  let webhooks: WebhooksSection;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, { env: ENV });
    const listed = await http(server, "GET", "/v1/event-types");
    expect(listed.status).toBe(200);
    catalog = listed.body.data;
    webhooks = (await http(server, "GET", "/v1/openapi.json", { apiKey: null })).body.webhooks;
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("lists every event type once, authenticated, each described alike in OpenAPI and GraphQL", async () => {
    expect(catalog.map((entry) => entry.type)).toEqual(TYPES);
    expect((await http(server, "GET", "/v1/event-types", { apiKey: null })).status).toBe(401);

    expect(Object.keys(webhooks)).toEqual(TYPES);
    for (const { type, description, schema } of catalog) {
      const post = webhooks[type]!.post;
      expect(post.requestBody.content["application/json"]!.schema).toEqual(schema);
      expect((post as unknown as { description: string }).description).toBe(description);
      expect(post.parameters.map((parameter) => [parameter.name, parameter.in, parameter.required])).toEqual([
        ["webhook-id", "header", true],
        ["webhook-timestamp", "header", true],
        ["webhook-signature", "header", true],
      ]);
      expect(Object.keys(post.responses)).toContain("2XX");
      // Each schema compiles in strict mode: no unknown keyword, no type ajv would have to guess.
      withLabel(type, () => expect(() => strictCompile(schema)).not.toThrow());
    }

    const data = await gqlData<{ __type: { enumValues: { name: string; description: string }[] } }>(
      server,
      '{ __type(name: "LifecycleEventType") { enumValues { name description } } }',
    );
    expect(
      data.__type.enumValues.map((value) => ({ type: value.name.toLowerCase(), description: value.description })),
    ).toEqual(catalog.map(({ type, description }) => ({ type, description })));
  });

  it("every body delivered for every event type validates against its catalog schema and its OpenAPI entry", async () => {
    const { organizationId, apiKey } = await server.newOrganization(`catalog-${kind}`);
    const caller: Caller = { url: server.url, apiKey };
    const path = `/catalog/${kind}`;
    const endpoint = await createEndpoint(caller, { url: receiver.url(path) });
    receiver.verifyWith(path, endpoint.secret);

    // Every event type, and both sides of each nullable field: a child (a parent reference), estimates set
    // then cleared, a deactivation by hand and by DELETE.
    const parent = await createReference(caller, { tags: [{ name: "catalog" }] });
    const id = parent.id as string;
    await http(caller, "POST", `/v1/references/${id}/extractions`, { body: { status: "succeeded" } });
    await http(caller, "POST", `/v1/references/${id}/extractions`, {
      body: { status: "failed", error: { code: "TIMEOUT", message: "slow carrier" } },
    });
    await http(caller, "POST", `/v1/references/${id}/updates`, {
      body: { estimated_departure: "2026-12-01T08:00:00+01:00", estimated_arrival: "2026-12-20T00:00:00Z", x: [1] },
    });
    await http(caller, "POST", `/v1/references/${id}/updates`, {
      body: { estimated_departure: null, estimated_arrival: null },
    });
    await http(caller, "POST", `/v1/references/${id}/children`, { body: { container_ids: ["MSCU1234566"] } });
    await http(caller, "POST", `/v1/references/${id}/deactivate`, { body: { reason: "data_not_found" } });
    await http(caller, "POST", `/v1/references/${id}/reactivate`);
    expect((await http(caller, "DELETE", `/v1/references/${id}`)).status).toBe(200);

    const log = (await http(caller, "GET", `/v1/references/${id}/events?limit=500`)).body.data as any[];
    const hooks = await receiver.waitForCount(path, log.length + 1);
    expect(new Set(hooks.map((hook) => hook.json.type))).toEqual(new Set(TYPES));

    const fromCatalog = new Map(catalog.map(({ type, schema }) => [type, strictCompile(schema)]));
    const fromOpenApi = new Map(
      TYPES.map((type) => [type, strictCompile(webhooks[type]!.post.requestBody.content["application/json"]!.schema)]),
    );
    for (const hook of hooks) {
      const type = hook.json.type as string;
      expect(hook.verifiedBy).toEqual([endpoint.secret]);
      expect(hook.json.organization_id).toBe(organizationId);
      withLabel(`${type}: ${hook.body}`, () => {
        expect(errorsOf(fromCatalog.get(type)!, hook.json)).toEqual([]);
        expect(errorsOf(fromOpenApi.get(type)!, hook.json)).toEqual([]);
      });
    }
    // The nullable fields were seen both ways.
    const payloads = (type: string) => hooks.filter((hook) => hook.json.type === type).map((hook) => hook.json.payload);
    expect(payloads("reference_created").map((payload) => payload.parent_reference_id)).toEqual(
      expect.arrayContaining([null, id]),
    );
    expect(payloads("estimated_arrival_changed").map((payload) => payload.current)).toEqual(
      expect.arrayContaining([null, "2026-12-20T00:00:00.000Z"]),
    );
  });

  it("the schemas are closed where the contract is: a wrong body fails validation", async () => {
    const validatorOf = (type: string) => strictCompile(catalog.find((entry) => entry.type === type)!.schema);
    const envelope = {
      id: "01900000-0000-7000-8000-000000000001",
      occurred_at: "2026-11-22T00:00:00.000Z",
      reference_id: "01900000-0000-7000-8000-000000000002",
      organization_id: "01900000-0000-7000-8000-000000000003",
      reference_tags: [{ id: "01900000-0000-7000-8000-000000000004", name: "x" }],
      status: "data_received",
    };
    const base = { reference_id: envelope.reference_id, organization_id: envelope.organization_id };
    const failed = {
      ...envelope,
      type: "extraction_failed",
      payload: { ...base, status: "failed", error: { code: "X", message: "y" }, consecutive_failures: 2 },
    };
    const validateFailed = validatorOf("extraction_failed");
    expect(errorsOf(validateFailed, failed)).toEqual([]);
    const { consecutive_failures: _dropped, ...missing } = failed.payload;
    const wrong = [
      { ...failed, extra: 1 },
      { ...failed, status: "test" },
      { ...failed, type: "extraction_succeeded" },
      { ...failed, reference_tags: [{ id: "not-a-uuid", name: "x" }] },
      { ...failed, reference_tags: [{ ...envelope.reference_tags[0], colour: "red" }] },
      { ...failed, payload: missing },
      { ...failed, payload: { ...failed.payload, extra: true } },
      { ...failed, payload: { ...failed.payload, consecutive_failures: "2" } },
      { ...failed, payload: { ...failed.payload, error: { code: "X" } } },
      { ...failed, occurred_at: "yesterday" },
    ];
    for (const body of wrong) withLabel(JSON.stringify(body), () => expect(validateFailed(body)).toBe(false));

    // The update document is the tracking pipeline's JSON: open, any keys.
    const update = {
      ...envelope,
      type: "reference_update_created",
      payload: { ...base, reference_update_id: envelope.id, update: { vessel: "EVER GIVEN", legs: [{ n: 1 }] } },
    };
    const validateUpdate = validatorOf("reference_update_created");
    expect(errorsOf(validateUpdate, update)).toEqual([]);
    expect(validateUpdate({ ...update, payload: { ...update.payload, update: "text" } })).toBe(false);
    expect(validateUpdate({ ...update, payload: { ...update.payload, extra: 1 } })).toBe(false);
  });
});
