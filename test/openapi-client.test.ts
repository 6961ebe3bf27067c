import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import openapiTS, { astToString, type OpenAPI3 } from "openapi-typescript";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { http } from "./support/http.ts";
import { startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * A client generated from /v1/openapi.json with openapi-typescript (the usual tool of TypeScript users) must
 * give every success body a type. The client below uses the generated types of a few operations the way an
 * application would, and is type-checked with the TypeScript compiler: an untyped body (`unknown`, or no
 * content at all) makes a property access or an `@ts-expect-error` fail the check.
 */

const CLIENT = `
import type { components, paths } from "./api";

type Json<Path extends keyof paths, Method extends keyof paths[Path], Status extends number> =
  paths[Path][Method] extends { responses: Record<Status, { content: { "application/json": infer Body } }> }
    ? Body
    : never;

/** false when a body is missing (never) or untyped (unknown / any). */
type Typed<Body> = [Body] extends [never] ? false : unknown extends Body ? false : true;
export const everyBodyTyped: [
  Typed<Json<"/v1/tags", "post", 201>>,
  Typed<Json<"/v1/references", "get", 200>>,
  Typed<Json<"/v1/references", "post", 201>>,
  Typed<Json<"/v1/references/{referenceId}/events", "get", 200>>,
  Typed<Json<"/v1/webhooks", "post", 201>>,
  Typed<Json<"/v1/webhooks/{webhookId}/deliveries/{deliveryId}", "get", 200>>,
] = [true, true, true, true, true, true];

export function tagName(tag: Json<"/v1/tags", "post", 201>): string {
  const created: string = tag.created_at;
  // @ts-expect-error Tag has no such field
  void tag.colour;
  return tag.name + created;
}

export function tagNamesOnPage(page: Json<"/v1/references", "get", 200>): string[] {
  const next: string | null = page.next_cursor;
  void next;
  return page.data.flatMap((reference) => reference.tags.map((tag) => tag.name));
}

export function createdReferenceId(created: Json<"/v1/references", "post", 201>): string {
  const active: boolean = created.reference.active;
  void active;
  return created.reference.reference_id;
}

export function eventTypes(page: Json<"/v1/references/{referenceId}/events", "get", 200>) {
  const types: components["schemas"]["LifecycleEvent"]["type"][] = page.data.map((event) => event.type);
  // @ts-expect-error not a lifecycle event type
  const wrong: (typeof types)[number] = "reference_exploded";
  void wrong;
  return types;
}

// null for an ed25519 endpoint, whose private key is never shown (its public_key verifies).
export function secretOf(endpoint: Json<"/v1/webhooks", "post", 201>): string | null {
  return endpoint.signing === "ed25519" ? endpoint.public_key : endpoint.secret;
}

export function attemptStatuses(delivery: Json<"/v1/webhooks/{webhookId}/deliveries/{deliveryId}", "get", 200>) {
  return delivery.attempts.map((attempt): number | null => attempt.status_code);
}

export function problemCode(problem: components["schemas"]["Problem"]): string {
  return problem.code;
}
`;

/** Generates `api.d.ts` from `document`, writes the client beside it and returns the compiler's complaints. */
async function typeCheckClient(folder: string, document: OpenAPI3): Promise<string[]> {
  writeFileSync(join(folder, "api.d.ts"), astToString(await openapiTS(document)));
  writeFileSync(join(folder, "client.ts"), CLIENT);
  const program = ts.createProgram([join(folder, "client.ts")], {
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

describe("a TypeScript client generated from the OpenAPI document", () => {
  let server: TestServer;
  let document: OpenAPI3;
  const folders: string[] = [];
  const newFolder = () => {
    const folder = mkdtempSync(join(tmpdir(), "reftrail-openapi-client-"));
    folders.push(folder);
    return folder;
  };

  beforeAll(async () => {
    server = await startTestServer("sqlite");
    document = (await http(server, "GET", "/v1/openapi.json", { apiKey: null })).body as OpenAPI3;
  });
  afterAll(async () => {
    await server?.close();
    for (const folder of folders) rmSync(folder, { recursive: true, force: true });
  });

  it("type-checks: every success body used by the client has a type", async () => {
    expect(await typeCheckClient(newFolder(), document)).toEqual([]);
  }, 60_000);

  it("fails to type-check when an operation does not document its body (the check can fail)", async () => {
    const undocumented = structuredClone(document) as any;
    delete undocumented.paths["/v1/tags"].post.responses["201"].content;
    const complaints = await typeCheckClient(newFolder(), undocumented as OpenAPI3);
    expect(complaints.length).toBeGreaterThan(0);
  }, 60_000);
});
