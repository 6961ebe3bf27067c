import { createHash, randomUUID } from "node:crypto";
import { Ajv, type ValidateFunction } from "ajv";
import addFormats from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { http, type HttpResult } from "./support/http.ts";
import { startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { eventually } from "./support/webhooks.ts";
import { withLabel } from "./support/with-label.ts";

/*
 * /v1/openapi.json is the contract a client is generated from (issue 12). This suite calls every /v1 operation
 * of the document for real and checks each answer against it: the status is documented for the operation, the
 * content type is the documented one (problems: application/problem+json), the body validates against the
 * documented schema, and the documented headers (Location, Retry-After, WWW-Authenticate) are sent.
 *
 * Fastify serializes responses with the same schemas, and a serializer strips what a schema does not list, so the
 * wire body alone could never show an undocumented field. A preSerialization hook therefore also records what
 * each handler produced, and that is validated too (the schemas say additionalProperties: false): a field added
 * to a serializer without its schema fails here instead of silently disappearing from responses.
 *
 * The document and the serialization are the same on both databases, so SQLite suffices here.
 */

type Doc = {
  paths: Record<
    string,
    Record<string, { operationId: string; parameters?: DocParameter[]; responses: Record<string, DocResponse> }>
  >;
  components: { schemas: Record<string, unknown> };
};
type DocParameter = { name: string; in: string; description?: string };
type DocResponse = {
  description: string;
  headers?: Record<string, unknown>;
  content?: Record<string, { schema: unknown }>;
};

interface Observed {
  readonly method: string;
  readonly route: string;
  readonly status: number;
  readonly payload: unknown;
}

const addFormatsPlugin = addFormats as unknown as (ajv: Ajv) => Ajv;

describe("OpenAPI document against real responses (sqlite)", () => {
  let server: TestServer;
  let limited: TestServer;
  let receiver: WebhookReceiver;
  let doc: Doc;
  const ajv = addFormatsPlugin(new Ajv({ strict: false, allErrors: true }));
  const validators = new Map<string, ValidateFunction>();
  /** What handlers produced before serialization, by `METHOD route status`. */
  const produced: Observed[] = [];
  /** Every `METHOD /path status` seen, to prove that each documented operation was called. */
  const called = new Set<string>();

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer("sqlite", {
      env: { WEBHOOK_RETRY_SCHEDULE: "0s,100ms", WEBHOOK_TIMEOUT: "1s", WEBHOOK_POLL_INTERVAL: "50ms" },
      beforeListen: (app) =>
        app.http.addHook("preSerialization", async (request, reply, payload) => {
          if (request.routeOptions.url?.startsWith("/v1/") && request.routeOptions.url !== "/v1/openapi.json") {
            produced.push({
              method: request.method,
              route: request.routeOptions.url,
              status: reply.statusCode,
              // What JSON.stringify would send: Dates as strings, undefined fields dropped.
              payload: JSON.parse(JSON.stringify(payload)) as unknown,
            });
          }
          return payload;
        }),
    });
    limited = await startTestServer("sqlite", { env: { RATE_LIMIT_PER_MINUTE: "2" } });
    const result = await http(server, "GET", "/v1/openapi.json", { apiKey: null });
    expect(result.status).toBe(200);
    doc = result.body as Doc;
    ajv.addSchema(doc, "openapi.json");
  });
  afterAll(async () => {
    await server?.close();
    await limited?.close();
    await receiver?.close();
  });

  /** "/v1/tags/0192…" -> the document's path template "/v1/tags/{tagId}". */
  function templateOf(method: string, path: string): string {
    const bare = path.split("?")[0]!;
    const match = Object.keys(doc.paths).find((template) => {
      if (!doc.paths[template]![method]) return false;
      const pattern = new RegExp(`^${template.replace(/\{[^}]+\}/g, "[^/]+")}$`);
      return pattern.test(bare);
    });
    if (!match) throw new Error(`${method.toUpperCase()} ${bare} is not in the OpenAPI document`);
    return match;
  }

  function validatorFor(template: string, method: string, status: number, mediaType: string): ValidateFunction {
    const pointer = ["paths", template, method, "responses", String(status), "content", mediaType, "schema"]
      .map((segment) => segment.replaceAll("~", "~0").replaceAll("/", "~1"))
      .join("/");
    let validate = validators.get(pointer);
    if (!validate) {
      validate = ajv.compile({ $ref: `openapi.json#/${pointer}` });
      validators.set(pointer, validate);
    }
    return validate;
  }

  /** Sends a request and checks the answer against the document; returns it for the scenario to go on. */
  async function call(
    method: string,
    path: string,
    options: Parameters<typeof http>[3] & { expect: number; on?: TestServer } = { expect: 200 },
  ): Promise<HttpResult> {
    const result = await http(options.on ?? server, method, path, options);
    const lower = method.toLowerCase();
    const template = templateOf(lower, path);
    const where = `${method} ${template} -> ${result.status}`;
    withLabel(`${where}: ${JSON.stringify(result.body)}`, () => expect(result.status).toBe(options.expect));
    called.add(`${lower} ${template} ${result.status}`);

    const documented = doc.paths[template]![lower]!.responses[String(result.status)];
    withLabel(`${where} is not documented`, () => expect(documented).toBeDefined());
    for (const header of Object.keys(documented!.headers ?? {})) {
      // Idempotent-Replayed is only sent on replays; every other documented header is always sent.
      if (header === "Idempotent-Replayed") continue;
      withLabel(`${where}: header ${header}`, () => expect(result.headers.get(header)).not.toBeNull());
    }
    if (!documented!.content) {
      withLabel(`${where}: documented without a body`, () => expect(result.body).toBeUndefined());
      return result;
    }
    const mediaType = (result.headers.get("content-type") ?? "").split(";")[0]!.trim();
    withLabel(where, () => expect(Object.keys(documented!.content!)).toContain(mediaType));
    const validate = validatorFor(template, lower, result.status, mediaType);
    withLabel(`${where}: body`, () => expect(validate(result.body) ? [] : validate.errors).toEqual([]));
    return result;
  }

  it("lists the REST operations only, with named component schemas and problem+json errors", () => {
    for (const path of Object.keys(doc.paths)) expect(path).toMatch(/^\/v1\//);
    expect(Object.keys(doc.paths)).not.toContain("/v1/openapi.json");
    expect(Object.keys(doc.components.schemas)).toEqual(
      expect.arrayContaining(["Tag", "Reference", "LifecycleEvent", "WebhookEndpoint", "WebhookDelivery", "Problem"]),
    );
    const operationIds: string[] = [];
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        // Generators name client methods after it.
        withLabel(`${method} ${path}`, () => expect(operation.operationId).toMatch(/^[a-z][A-Za-z]+$/));
        operationIds.push(operation.operationId);
        const statuses = Object.keys(operation.responses);
        withLabel(`${method} ${path}`, () => expect(statuses.some((status) => status.startsWith("2"))).toBe(true));
        for (const [status, response] of Object.entries(operation.responses)) {
          if (status.startsWith("2")) {
            const schema = response.content?.["application/json"]?.schema as { $ref?: string } | undefined;
            if (status !== "204") {
              withLabel(`${method} ${path} ${status}`, () => expect(schema?.$ref).toMatch(/^#\/components\//));
            }
          } else {
            withLabel(`${method} ${path} ${status}`, () =>
              expect(Object.keys(response.content ?? {})).toEqual(["application/problem+json"]),
            );
          }
        }
        // An extraction outcome is an event of the reference's log, not a resource with a URL of its own; so are
        // the events a bulk ingestion writes.
        const withoutUrl = ["/v1/references/{referenceId}/extractions", "/v1/ingestions"];
        if (operation.responses["201"] && !withoutUrl.includes(path)) {
          const headers = Object.keys(operation.responses["201"].headers ?? {});
          withLabel(`${method} ${path}`, () => expect(headers).toContain("Location"));
        }
        expect(Object.keys(operation.responses["429"]?.headers ?? {})).toContain("Retry-After");
        expect(Object.keys(operation.responses["401"]?.headers ?? {})).toContain("WWW-Authenticate");
      }
    }
    expect(new Set(operationIds).size).toBe(operationIds.length);
  });

  it("describes every parameter of every operation (path, query and header)", () => {
    const undescribed: string[] = [];
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        for (const parameter of operation.parameters ?? []) {
          if (!parameter.description?.trim()) undescribed.push(`${method} ${path} ${parameter.in} ${parameter.name}`);
        }
      }
    }
    expect(undescribed).toEqual([]);
  });

  it("answers every operation as documented, and no handler produces an undocumented field", async () => {
    // Tags
    const tag = (await call("POST", "/v1/tags", { body: { name: "Urgent" }, expect: 201 })).body;
    const created = await call("POST", "/v1/tags", { body: { name: "Cold chain" }, expect: 201 });
    expect(created.headers.get("location")).toBe(`/v1/tags/${created.body.id}`);
    expect((await call("GET", created.headers.get("location")!, { expect: 200 })).body).toEqual(created.body);
    await call("POST", "/v1/tags", { body: { name: "urgent" }, expect: 409 });
    await call("POST", "/v1/tags", { body: { name: "" }, expect: 422 });
    await call("POST", "/v1/tags", { rawBody: "{", headers: { "content-type": "application/json" }, expect: 400 });
    await call("POST", "/v1/tags", { rawBody: "x", headers: { "content-type": "text/plain" }, expect: 415 });
    await call("POST", "/v1/tags", { body: { name: "x".repeat(2_000_000) }, expect: 413 });
    await call("GET", "/v1/tags?limit=1", { expect: 200 });
    await call("GET", "/v1/tags?limit=0", { expect: 400 });
    await call("GET", "/v1/tags", { apiKey: null, expect: 401 });
    await call("GET", `/v1/tags/${tag.id}`, { expect: 200 });
    await call("GET", "/v1/tags/01900000-0000-7000-8000-000000000000", { expect: 404 });
    await call("PATCH", `/v1/tags/${tag.id}`, { body: { name: "Very urgent" }, expect: 200 });
    await call("PATCH", `/v1/tags/${tag.id}`, { body: { name: "cold CHAIN" }, expect: 409 });

    // References
    const reference = await call("POST", "/v1/references", {
      body: { container_id: "CSQU3054383", carrier_code: "MAEU", tags: [{ id: tag.id }, { name: "Reefer" }] },
      expect: 201,
    });
    const referenceId = reference.body.reference.id as string;
    expect(reference.headers.get("location")).toBe(`/v1/references/${referenceId}`);
    await call("POST", "/v1/references", { body: { carrier_code: "MAEU" }, expect: 422 });
    const parent = (
      await call("POST", "/v1/references", { body: { bill_of_lading: "BOL-1", carrier_code: "MAEU" }, expect: 201 })
    ).body.reference;
    await call("GET", "/v1/references?tag_match=any&limit=5", { expect: 200 });
    await call("GET", "/v1/references?tag_ids=not-a-uuid", { expect: 400 });
    await call("GET", `/v1/references/${referenceId}`, { expect: 200 });
    await call("GET", `/v1/tags/${tag.id}/references`, { expect: 200 });
    await call("POST", `/v1/references/${referenceId}/tags`, { body: { tags: [{ name: "Hazmat" }] }, expect: 200 });
    await call("POST", `/v1/references/${referenceId}/tags`, { body: { tags: [{ colour: "red" }] }, expect: 422 });
    await call("DELETE", `/v1/references/${referenceId}/tags/${tag.id}`, { expect: 204 });
    await call("POST", `/v1/references/${referenceId}/extractions`, { body: { status: "succeeded" }, expect: 201 });
    await call("POST", `/v1/references/${referenceId}/extractions`, {
      body: { status: "failed", error: { code: "TIMEOUT", message: "carrier site timed out" } },
      expect: 201,
    });
    const update = await call("POST", `/v1/references/${referenceId}/updates`, {
      body: { estimated_arrival: "2026-12-01T10:00:00+01:00", vessel: "Ever Given" },
      expect: 201,
    });
    expect(update.headers.get("location")).toBe(`/v1/references/${referenceId}/updates/${update.body.id}`);
    expect((await call("GET", update.headers.get("location")!, { expect: 200 })).body).toEqual(update.body);
    await call("GET", `/v1/references/${referenceId}/updates/01900000-0000-7000-8000-000000000000`, { expect: 404 });
    await call("GET", `/v1/references/${referenceId}/updates`, { expect: 200 });
    await call("POST", `/v1/references/${parent.id}/children`, {
      body: { container_ids: ["MSCU1234566"] },
      expect: 200,
    });
    await call("GET", `/v1/references/${referenceId}/events?type=reference_created,extraction_failed`, {
      expect: 200,
    });
    await call("GET", `/v1/references/${referenceId}/events?order=sideways`, { expect: 400 });
    await call("GET", `/v1/events?limit=2&type=reference_created&tag_names=urgent`, { expect: 200 });
    await call("GET", `/v1/events?reference_id=${referenceId}&wait=1`, { expect: 200 });
    await call("GET", "/v1/events?wait=31", { expect: 400 });
    await call("GET", "/v1/events?reference_id=01900000-0000-7000-8000-000000000000", { expect: 404 });
    // Bulk ingestion: atomic (201), per item (200, with a refused item), and refusals of the whole request.
    await call("POST", "/v1/ingestions", {
      body: {
        items: [
          { kind: "extraction", reference_id: referenceId, status: "succeeded" },
          { kind: "update", reference_id: referenceId, update: { estimated_departure: "2026-11-30T08:00:00Z" } },
        ],
      },
      expect: 201,
    });
    await call("POST", "/v1/ingestions", {
      body: {
        mode: "per_item",
        items: [
          { kind: "extraction", reference_id: referenceId, status: "failed", error: { code: "X", message: "y" } },
          { kind: "reactivate", reference_id: referenceId },
        ],
      },
      expect: 200,
    });
    await call("POST", "/v1/ingestions", {
      body: { items: [{ kind: "reactivate", reference_id: referenceId }] },
      expect: 409,
    });
    await call("POST", "/v1/ingestions", {
      body: { items: [{ kind: "reactivate", reference_id: "01900000-0000-7000-8000-000000000000" }] },
      expect: 404,
    });
    await call("POST", "/v1/ingestions", { body: { items: [] }, expect: 422 });
    await call("POST", `/v1/references/${referenceId}/reactivate`, { expect: 409 });
    await call("POST", `/v1/references/${referenceId}/deactivate`, { body: { reason: "data_not_found" }, expect: 200 });
    await call("POST", `/v1/references/${referenceId}/reactivate`, { expect: 200 });
    await call("DELETE", `/v1/references/${referenceId}`, { expect: 200 });

    // Webhooks: a real delivery to a receiver on loopback, so that attempts exist.
    const endpoint = await call("POST", "/v1/webhooks", {
      body: { url: receiver.url("/openapi"), description: "contract test" },
      expect: 201,
    });
    const webhookId = endpoint.body.id as string;
    expect(endpoint.headers.get("location")).toBe(`/v1/webhooks/${webhookId}`);
    await call("POST", "/v1/webhooks", { body: { url: "ftp://example.com" }, expect: 422 });
    await call("GET", "/v1/webhooks", { expect: 200 });
    await call("GET", `/v1/webhooks/${webhookId}`, { expect: 200 });
    await call("PATCH", `/v1/webhooks/${webhookId}`, { body: { description: "renamed" }, expect: 200 });
    await call("POST", `/v1/webhooks/${webhookId}/rotate-secret`, { expect: 200 });
    const test = await call("POST", `/v1/webhooks/${webhookId}/test`, { expect: 202 });
    await eventually(
      async () => (await http(server, "GET", `/v1/webhooks/${webhookId}/deliveries/${test.body.id}`)).body.attempts[0],
      10_000,
      "the test delivery's first attempt",
    );
    await call("GET", `/v1/webhooks/${webhookId}/deliveries?status=succeeded`, { expect: 200 });
    await call("GET", `/v1/webhooks/${webhookId}/deliveries?status=lost`, { expect: 400 });
    const delivery = await call("GET", `/v1/webhooks/${webhookId}/deliveries/${test.body.id}`, { expect: 200 });
    expect(delivery.body.attempts.length).toBeGreaterThan(0);
    await call("POST", `/v1/webhooks/${webhookId}/deliveries/${test.body.id}/resend`, { expect: 202 });
    const since = new Date(Date.now() - 3_600_000).toISOString();
    await call("POST", `/v1/webhooks/${webhookId}/recover`, { body: { since, dry_run: true }, expect: 200 });
    await call("POST", `/v1/webhooks/${webhookId}/recover`, { body: { since }, expect: 202 });
    await call("POST", `/v1/webhooks/${webhookId}/replay`, { body: { since, dry_run: true }, expect: 200 });
    await call("POST", `/v1/webhooks/${webhookId}/replay`, { body: { since: "2000-01-01T00:00:00Z" }, expect: 422 });
    await call("GET", `/v1/webhooks/${webhookId}/held-back`, { expect: 200 });
    await call("GET", "/v1/event-types", { expect: 200 });
    await call("GET", "/v1/event-types", { apiKey: null, expect: 401 });
    // Trusted documents: a manifest registered, listed, one read; a bad entry refused.
    const documentText = "{ __typename }";
    const documentId = `sha256:${createHash("sha256").update(documentText).digest("hex")}`;
    await call("POST", "/v1/trusted-documents", { body: { [documentId]: documentText }, expect: 200 });
    await call("POST", "/v1/trusted-documents", { body: { [documentId]: "{ other }" }, expect: 422 });
    await call("GET", "/v1/trusted-documents", { expect: 200 });
    await call("GET", `/v1/trusted-documents/${documentId}`, { expect: 200 });
    await call("GET", `/v1/trusted-documents/sha256:${"0".repeat(64)}`, { expect: 404 });
    await call("POST", `/v1/webhooks/${webhookId}/replay`, { body: { since }, expect: 202 });
    await call("GET", `/v1/webhooks/${webhookId}/replay`, { expect: 200 });
    await call("DELETE", `/v1/webhooks/${webhookId}`, { expect: 204 });
    await call("GET", `/v1/webhooks/${webhookId}`, { expect: 404 });

    // Deletion last: the tag disappears from every reference.
    await call("DELETE", `/v1/tags/${tag.id}`, { expect: 204 });

    // API keys and the audit log (SPEC §3.1), and a scope the key lacks.
    const key = await call("POST", "/v1/api-keys", {
      body: { name: "reader", scopes: ["references:read"] },
      expect: 201,
    });
    await call("POST", "/v1/api-keys", {
      body: { name: "past", scopes: ["references:read"], expires_at: since },
      expect: 422,
    });
    await call("GET", "/v1/api-keys", { expect: 200 });
    await call("GET", `/v1/api-keys/${key.body.id}`, { expect: 200 });
    await call("GET", "/v1/webhooks", { apiKey: key.body.key, expect: 403 });
    await call("DELETE", `/v1/api-keys/${key.body.id}`, { expect: 204 });
    await call("GET", `/v1/api-keys/${randomUUID()}`, { expect: 404 });
    await call("GET", "/v1/audit-events", { expect: 200 });

    // Rate limiting, on a server that allows two requests a minute.
    await call("GET", "/v1/tags", { on: limited, expect: 200 });
    await call("GET", "/v1/tags", { on: limited, expect: 200 });
    const limitedResult = await call("GET", "/v1/tags", { on: limited, expect: 429 });
    expect(Number(limitedResult.headers.get("retry-after"))).toBeGreaterThan(0);

    // Every documented operation answered at least once with a success.
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const method of Object.keys(operations)) {
        const successes = [...called].filter((entry) => entry.startsWith(`${method} ${path} 2`));
        withLabel(`${method.toUpperCase()} ${path} was never called successfully`, () =>
          expect(successes).not.toEqual([]),
        );
      }
    }

    // And every handler's output, before serialization, is exactly what the document describes.
    expect(produced.length).toBeGreaterThan(40);
    for (const { method, route, status, payload } of produced) {
      const template = route.replace(/:(\w+)/g, "{$1}");
      const content = doc.paths[template]![method.toLowerCase()]!.responses[String(status)]!.content!;
      const mediaType = status >= 400 ? "application/problem+json" : "application/json";
      const validate = validatorFor(template, method.toLowerCase(), status, mediaType);
      expect(Object.keys(content)).toContain(mediaType);
      withLabel(`${method} ${template} ${status} before serialization`, () =>
        expect(validate(payload) ? [] : validate.errors).toEqual([]),
      );
    }
  });

  it("strictly rejects a field the document does not list (the check above can fail)", () => {
    const validate = validatorFor("/v1/tags/{tagId}", "get", 200, "application/json");
    const tag = { id: "01900000-0000-7000-8000-000000000000", name: "x", created_at: "2026-11-22T00:00:00.000Z" };
    expect(validate(tag)).toBe(true);
    expect(validate({ ...tag, colour: "red" })).toBe(false);
    expect(validate({ id: tag.id, name: "x" })).toBe(false);
  });
});
