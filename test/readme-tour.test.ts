import { execFile, spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { createServer, connect, type AddressInfo } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { http } from "./support/http.ts";
import { startTestServer, type TestServer } from "./support/test-server.ts";
import { eventually } from "./support/webhooks.ts";

/*
 * The README's five-minute tour is run as written, with curl and jq in a shell, against a started server: only
 * its key, base URL and the webhook receiver's port are replaced. curl is told to fail on an HTTP error (and the
 * shell to stop), so a call the API refuses fails the test. The REST calls, the GraphQL query and the webhook
 * steps run in one shell, with the README's receiver running beside it; then what the calls made is read back
 * through the API, and the receiver must have printed the delivery. (The subscription's curl streams forever:
 * test/subscriptions-sse.test.ts covers that transport.)
 */

const run = promisify(execFile);
const README = readFileSync(join(import.meta.dirname, "..", "README.md"), "utf8");

/** The first ```sh block under each `### ` heading of the README's "A five-minute tour" section. */
function tourBlocks(): Map<string, string> {
  const section = README.split(/^## /m).find((part) => part.startsWith("A five-minute tour"));
  if (!section) throw new Error('README.md has no "## A five-minute tour" section');
  const blocks = new Map<string, string>();
  for (const part of section.split(/^### /m).slice(1)) {
    const heading = part.slice(0, part.indexOf("\n")).trim();
    const blocksOfPart = [...part.matchAll(/```sh\n([\s\S]*?)```/g)].map((match) => match[1]!);
    if (blocksOfPart.length > 0) blocks.set(heading, blocksOfPart.join("\n"));
  }
  return blocks;
}

/** The one block of the tour's `heading` whose text matches `pattern`. */
function block(heading: string, pattern: RegExp = /./): string {
  const text = tourBlocks().get(heading);
  const chosen = text
    ?.split(/(?=^(?:node|curl|KEY|QUERY))/m)
    .filter((piece) => pattern.test(piece))
    .join("\n");
  if (!chosen) throw new Error(`README.md's tour has no ${heading} block matching ${pattern}`);
  return chosen;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, "127.0.0.1", () => resolve(socket.end() && true)).on("error", () => resolve(false));
  });

describe("the README's five-minute tour", () => {
  let server: TestServer;
  let receiver: ChildProcess | undefined;

  beforeAll(async () => {
    server = await startTestServer("sqlite");
  }, 60_000);
  afterAll(async () => {
    receiver?.kill();
    await server?.close();
  });

  it("runs as written: REST, GraphQL, and a first webhook the README's receiver prints", async () => {
    const blocks = tourBlocks();
    expect([...blocks.keys()]).toEqual(["REST", "GraphQL", "A webhook", "A subscription"]);
    const rest = blocks.get("REST")!;
    expect(rest.match(/^KEY=/m)).not.toBeNull();
    expect(rest.match(/^BASE=/m)).not.toBeNull();
    // Seven REST calls.
    expect((rest.match(/\bcurl /g) ?? []).length).toBe(7);

    const port = String(await freePort());
    const receiverScript = block("A webhook", /^node /).replaceAll("9000", port);
    let printed = "";
    receiver = spawn("sh", ["-c", `exec ${receiverScript}`], { stdio: ["ignore", "pipe", "inherit"] });
    receiver.stdout!.on("data", (chunk: Buffer) => (printed += chunk.toString("utf8")));
    await eventually(() => listening(Number(port)), 10_000, "the README's receiver to listen");

    const script = [rest, blocks.get("GraphQL")!, block("A webhook", /^curl /)]
      .join("\n")
      .replaceAll("9000", port)
      .replace(/^KEY=.*$/m, 'KEY="$TOUR_KEY"')
      .replace(/^BASE=.*$/m, 'BASE="$TOUR_BASE"');
    const { stdout } = await run("sh", ["-e", "-c", `curl() { command curl --fail-with-body "$@"; }\n${script}`], {
      env: { ...process.env, TOUR_KEY: server.apiKey, TOUR_BASE: server.url },
      timeout: 60_000,
    });
    expect(stdout).toContain('"name":"cold chain"');
    expect(stdout).toContain('"secret":"whsec_');
    // The feed to poll: the reference's three events, and the cursor to read on.
    expect(stdout).toMatch(/"next_cursor":"[^"]+","has_more":false\}/);
    // GraphQL: the reference with its tags and its log, each event with the tags of its time.
    expect(stdout).toContain('"containerId":"MSKU9070323"');
    expect(stdout).toContain('"referenceTags":[{"name":"cold chain"}]');

    const references = await http(server, "GET", "/v1/references?tag_names=cold%20chain");
    expect(references.body.data).toHaveLength(1);
    const [reference] = references.body.data;
    const events = await http(server, "GET", `/v1/references/${reference.id}/events?limit=10`);
    expect(events.body.data.map((event: { type: string }) => event.type)).toEqual([
      "reference_created",
      "reference_update_created",
      "estimated_arrival_changed",
      "reference_update_created",
      "estimated_arrival_changed",
    ]);
    const webhooks = await http(server, "GET", "/v1/webhooks");
    expect(webhooks.body.data.map((endpoint: { event_types: string[] }) => endpoint.event_types)).toEqual([
      ["estimated_arrival_changed"],
    ]);
    // The receiver printed the delivery of the webhook step's arrival change, with its signature headers.
    await eventually(async () => printed.includes("2026-12-27T06:00:00.000Z"), 15_000, "the receiver's output");
    expect(printed).toContain("'webhook-signature': 'v1,");
    expect(printed).toContain('"type":"estimated_arrival_changed"');
  }, 90_000);
});
