import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { http } from "./support/http.ts";
import { startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * The README's REST tour is run as written, with curl in a shell, against a started server: only its key and
 * base URL are replaced. curl is told to fail on an HTTP error (and the shell to stop), so a call the API refuses
 * fails the test; then what the calls made is read back through the API.
 */

const run = promisify(execFile);
const README = readFileSync(join(import.meta.dirname, "..", "README.md"), "utf8");

/** The shell block of the README's "A REST tour" section. */
function tourScript(): string {
  const section = README.split(/^## /m).find((part) => part.startsWith("A REST tour"));
  const block = section && /```sh\n([\s\S]*?)```/.exec(section)?.[1];
  if (!block) throw new Error('README.md has no "## A REST tour" section with a ```sh block');
  return block;
}

describe("the README's REST tour", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer("sqlite");
  }, 60_000);
  afterAll(async () => {
    await server?.close();
  });

  it("runs as written, and leaves the tag, the reference, its update and events, and the webhook", async () => {
    const script = tourScript();
    expect(script.match(/^KEY=/m)).not.toBeNull();
    expect(script.match(/^BASE=/m)).not.toBeNull();
    const runnable = script.replace(/^KEY=.*$/m, 'KEY="$TOUR_KEY"').replace(/^BASE=.*$/m, 'BASE="$TOUR_BASE"');
    const { stdout } = await run("sh", ["-e", "-c", `curl() { command curl --fail-with-body "$@"; }\n${runnable}`], {
      env: { ...process.env, TOUR_KEY: server.apiKey, TOUR_BASE: server.url },
      timeout: 60_000,
    });
    // Seven calls, of which six print their answer.
    expect((script.match(/\bcurl /g) ?? []).length).toBe(7);
    expect(stdout).toContain('"name":"cold chain"');
    expect(stdout).toContain('"secret":"whsec_');
    // The feed to poll: the reference's three events, and the cursor to read on.
    expect(stdout).toMatch(/"next_cursor":"[^"]+","has_more":false\}$/);

    const references = await http(server, "GET", "/v1/references?tag_names=cold%20chain");
    expect(references.body.data).toHaveLength(1);
    const [reference] = references.body.data;
    const events = await http(server, "GET", `/v1/references/${reference.id}/events?limit=10`);
    expect(events.body.data.map((event: { type: string }) => event.type)).toEqual([
      "reference_created",
      "reference_update_created",
      "estimated_arrival_changed",
    ]);
    const webhooks = await http(server, "GET", "/v1/webhooks");
    expect(webhooks.body.data.map((endpoint: { event_types: string[] }) => endpoint.event_types)).toEqual([
      ["estimated_arrival_changed"],
    ]);
  }, 90_000);
});
