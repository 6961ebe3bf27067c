import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Webhook } from "standardwebhooks";
import { expectStatus, http } from "./support/http.ts";
import { startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver, type ReceivedWebhook } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference } from "./support/webhooks.ts";

/*
 * docs/webhooks.md says which verifiers check an ed25519 endpoint's `v1a` signatures: its node:crypto function
 * does (run here as the page prints it, against real deliveries, before and during a rotation), and the
 * `standardwebhooks` npm package does not (it has no v1a). If that package learns v1a, the second test fails and
 * the page must say so.
 */

type Verifier = (publicKey: string, headers: Record<string, unknown>, body: string, tolerance?: number) => boolean;

const PAGE = join(import.meta.dirname, "..", "docs", "webhooks.md");
const ENV = { WEBHOOK_RETRY_SCHEDULE: "0s,150ms", WEBHOOK_POLL_INTERVAL: "50ms", WEBHOOK_WORKER: "on" };

/** The ```js block that follows the page's `verify-ed25519` marker, loaded as a module. */
async function pageVerifier(folder: string): Promise<Verifier> {
  const text = readFileSync(PAGE, "utf8");
  const block = /<!-- verify-ed25519:[^>]*-->\s*```js\n([\s\S]*?)```/.exec(text)?.[1];
  if (!block) throw new Error("docs/webhooks.md has no ```js block after its verify-ed25519 marker");
  const file = join(folder, "verify-ed25519.mjs");
  writeFileSync(file, block);
  const loaded = (await import(pathToFileURL(file).href)) as { verifyEd25519?: Verifier };
  if (typeof loaded.verifyEd25519 !== "function") throw new Error("the block exports no verifyEd25519 function");
  return loaded.verifyEd25519;
}

describe("verifiers of ed25519 signatures (docs/webhooks.md)", () => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  let folder: string;
  let verifyEd25519: Verifier;

  const deliveryFor = (path: string, referenceId: string): Promise<ReceivedWebhook> =>
    receiver.waitFor(() => receiver.on(path).find((hook) => hook.json?.reference_id === referenceId));

  beforeAll(async () => {
    folder = mkdtempSync(join(tmpdir(), "reftrail-verifier-"));
    verifyEd25519 = await pageVerifier(folder);
    receiver = await WebhookReceiver.start();
    server = await startTestServer("sqlite", { env: ENV });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
    rmSync(folder, { recursive: true, force: true });
  });

  it("the page's node:crypto function verifies real deliveries, before and during a rotation", async () => {
    const path = "/ed25519/page";
    const created = await createEndpoint(server, { url: receiver.url(path), signing: "ed25519" });
    const before = await deliveryFor(path, (await createReference(server)).id);
    expect(verifyEd25519(created.public_key, before.headers, before.body)).toBe(true);
    // A changed body, or a timestamp older than the tolerance, is refused.
    expect(verifyEd25519(created.public_key, before.headers, before.body.replace("}", " }"))).toBe(false);
    expect(verifyEd25519(created.public_key, before.headers, before.body, -1)).toBe(false);

    const rotated = await http(server, "POST", `/v1/webhooks/${created.id}/rotate-secret`);
    expectStatus(rotated, 200);
    const during = await deliveryFor(path, (await createReference(server)).id);
    expect(verifyEd25519(created.public_key, during.headers, during.body)).toBe(true);
    expect(verifyEd25519(rotated.body.public_key, during.headers, during.body)).toBe(true);
    expect(verifyEd25519(rotated.body.public_key, before.headers, before.body)).toBe(false);
  }, 60_000);

  it("the standardwebhooks npm package cannot verify v1a (it verifies v1 only)", async () => {
    const path = "/ed25519/standardwebhooks";
    const created = await createEndpoint(server, { url: receiver.url(path), signing: "ed25519" });
    const hook = await deliveryFor(path, (await createReference(server)).id);
    const headers = hook.headers as Record<string, string>;
    // Given the public key where it expects a secret, it looks for v1 signatures, finds none, and throws.
    const asSecret = created.public_key.slice("whpk_".length);
    expect(() => new Webhook(asSecret).verify(hook.body, headers)).toThrow();
    expect(verifyEd25519(created.public_key, hook.headers, hook.body)).toBe(true);
  }, 60_000);
});
