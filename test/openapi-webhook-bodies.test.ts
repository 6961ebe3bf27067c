import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import openapiTS, { astToString, type OpenAPI3 } from "openapi-typescript";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { expectStatus, http } from "./support/http.ts";
import { startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver, type ReceivedWebhook } from "./support/webhook-receiver.ts";
import { createEndpoint } from "./support/webhooks.ts";

/*
 * A receiver that generates its types from the OpenAPI document's `webhooks` section with openapi-typescript must
 * be able to assign what it really receives to them (issue 51): a free-form object written as a bare
 * `type: object` becomes `Record<string, never>` and a real update document fails to compile. The server below
 * delivers one body of every event type to a real receiver, and each body, as received, is compiled against the
 * generated type of its event. The document's free-form objects are also each said to be open.
 */

const ENV = { WEBHOOK_RETRY_SCHEDULE: "0s,150ms", WEBHOOK_POLL_INTERVAL: "50ms", WEBHOOK_WORKER: "on" };

/** Where a schema in the document is an object with no properties and no word on others (`{}` would be open). */
function freeFormWithoutWord(node: unknown, path = ""): string[] {
  if (Array.isArray(node)) return node.flatMap((item, index) => freeFormWithoutWord(item, `${path}/${index}`));
  if (node === null || typeof node !== "object") return [];
  const schema = node as Record<string, unknown>;
  const isObject = schema.type === "object" || (Array.isArray(schema.type) && schema.type.includes("object"));
  const here =
    isObject && !schema.properties && !schema.patternProperties && schema.additionalProperties === undefined
      ? [path]
      : [];
  return [...here, ...Object.entries(schema).flatMap(([key, value]) => freeFormWithoutWord(value, `${path}/${key}`))];
}

/** Compiles `bodies` (event type → the raw JSON received) against types generated from `document`. */
async function compileBodies(folder: string, document: OpenAPI3, bodies: Map<string, string>): Promise<string[]> {
  writeFileSync(join(folder, "api.d.ts"), astToString(await openapiTS(document)));
  const lines = [
    'import type { webhooks } from "./api";',
    "type Body<T extends keyof webhooks> = webhooks[T] extends",
    '  { post: { requestBody?: { content: { "application/json": infer B } } } } ? B : never;',
    ...[...bodies].map(([type, json]) => `export const ${type}: Body<"${type}"> = ${json};`),
  ];
  writeFileSync(join(folder, "bodies.ts"), `${lines.join("\n")}\n`);
  const program = ts.createProgram([join(folder, "bodies.ts")], {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    skipLibCheck: true,
    types: [],
  });
  return ts
    .getPreEmitDiagnostics(program)
    .map((diagnostic) => ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
}

describe("webhook bodies against types generated from the OpenAPI document", () => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  let document: OpenAPI3;
  const bodies = new Map<string, string>();
  const folders: string[] = [];
  const newFolder = () => {
    const folder = mkdtempSync(join(tmpdir(), "reftrail-webhook-types-"));
    folders.push(folder);
    return folder;
  };

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer("sqlite", { env: ENV });
    document = (await http(server, "GET", "/v1/openapi.json", { apiKey: null })).body as OpenAPI3;
    await createEndpoint(server, { url: receiver.url("/every-type") });

    // One reference's life makes every event type.
    const created = await http(server, "POST", "/v1/references", {
      body: { container_id: "MSKU9070323", carrier_code: "MAEU", tags: [{ name: "typed" }] },
    });
    expectStatus(created, 201);
    const path = `/v1/references/${created.body.reference.id}`;
    const calls: [string, unknown, number][] = [
      // An update document is the tracking side's own JSON: nested objects, arrays, numbers, nulls.
      [
        "/updates",
        {
          estimated_departure: "2026-12-20T08:00:00Z",
          estimated_arrival: "2026-12-24T08:00:00Z",
          vessel: { name: "MAERSK ESSEN", imo: 9456771 },
          legs: [{ port: "NLRTM", berth: null }],
        },
        201,
      ],
      ["/extractions", { status: "succeeded" }, 201],
      ["/extractions", { status: "failed", error: { code: "TIMEOUT", message: "The carrier did not answer" } }, 201],
      ["/deactivate", { reason: "data_not_found" }, 200],
      ["/reactivate", {}, 200],
    ];
    for (const [suffix, body, status] of calls) {
      expectStatus(await http(server, "POST", `${path}${suffix}`, { body }), status);
    }

    const types = Object.keys(document.webhooks ?? {});
    const received = await receiver.waitFor(() => {
      const hooks = receiver.on("/every-type");
      return types.every((type) => hooks.some((hook) => hook.json?.type === type)) && hooks;
    }, 20_000);
    for (const hook of received as ReceivedWebhook[]) bodies.set(hook.json.type, hook.body);
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });

  it("says of every free-form object that it is open", () => {
    expect(freeFormWithoutWord(document)).toEqual([]);
  });

  it("compiles a real body of every event type against its generated type", async () => {
    expect([...bodies.keys()].sort()).toEqual(Object.keys(document.webhooks ?? {}).sort());
    expect(await compileBodies(newFolder(), document, bodies)).toEqual([]);
  }, 60_000);

  it("fails to compile the update document against a bare `type: object` (the check can fail)", async () => {
    const closed = structuredClone(document) as any;
    const payload = closed.webhooks.reference_update_created.post.requestBody.content["application/json"].schema;
    delete payload.properties.payload.properties.update.additionalProperties;
    const complaints = await compileBodies(newFolder(), closed as OpenAPI3, bodies);
    expect(complaints.length).toBeGreaterThan(0);
  }, 60_000);
});
