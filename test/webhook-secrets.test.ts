import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Webhook } from "standardwebhooks";
import { ConfigError, loadConfig, loadWebhookSecretKey } from "../src/config.ts";
import { SecretCipher } from "../src/store/secret-cipher.ts";
import { http } from "./support/http.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, OffsetClock, type Caller } from "./support/webhooks.ts";

/*
 * Webhook signing secrets at rest (issue 10): encrypted with AES-256-GCM under WEBHOOK_SECRET_KEY, never stored in
 * plain text; every secret rotated out within 24 hours keeps signing. Signatures are checked with the independent
 * `standardwebhooks` package, the stored columns read with SQL.
 */

const ENV = {
  WEBHOOK_RETRY_SCHEDULE: "0s,150ms,300ms",
  WEBHOOK_TIMEOUT: "2s",
  WEBHOOK_LEASE: "5s",
  WEBHOOK_POLL_INTERVAL: "50ms",
};
const DAY_MS = 24 * 3_600_000;

interface StoredSecrets {
  readonly secret: string;
  readonly previous_secret: string | null;
}

describe.each(DATABASE_KINDS)("webhook secrets on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  const clock = new OffsetClock();
  let paths = 0;

  async function setUp(): Promise<{ caller: Caller; path: string }> {
    const { apiKey } = await server.newOrganization(`secrets-${++paths}`);
    return { caller: { url: server.url, apiKey }, path: `/${kind}/secrets/${paths}` };
  }

  async function storedSecrets(endpointId: string): Promise<StoredSecrets> {
    const [row] = await server.database.prisma.$queryRaw<StoredSecrets[]>`
      SELECT "secret", "previous_secret" FROM "webhook_endpoints" WHERE "id" = ${endpointId}`;
    return row!;
  }

  /** The first request `path` received for an event of `referenceId` (a retry of an earlier one is not it). */
  function deliveryFor(path: string, referenceId: string) {
    return receiver.waitFor(() => receiver.on(path).find((hook) => hook.json.reference_id === referenceId));
  }

  async function rotate(caller: Caller, endpointId: string): Promise<string> {
    const rotated = await http(caller, "POST", `/v1/webhooks/${endpointId}/rotate-secret`);
    expect(rotated.status).toBe(200);
    return rotated.body.secret;
  }

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, { env: ENV, clock });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("signs with every secret rotated out within 24 hours, and stores none of them in plain text", async () => {
    const { caller, path } = await setUp();
    const endpoint = await createEndpoint(caller, { url: receiver.url(path) });
    const first = endpoint.secret;
    const second = await rotate(caller, endpoint.id);
    const third = await rotate(caller, endpoint.id);

    receiver.verifyWith(path, first, second, third);
    const delivery = await deliveryFor(path, (await createReference(caller)).id);
    expect(delivery.signature.split(" ")).toHaveLength(3);
    // Each secret alone verifies the request, as a receiver that knows only one of them would.
    expect(delivery.verifiedBy).toEqual([first, second, third]);

    const stored = await storedSecrets(endpoint.id);
    expect(stored.secret).toMatch(/^v1:[\w-]{16}:[\w-]{22}:[\w-]+$/);
    expect(stored.previous_secret).toMatch(/^v1:/);
    for (const secret of [first, second, third]) {
      const keyText = secret.slice("whsec_".length);
      expect(JSON.stringify(stored)).not.toContain(keyText);
      expect(JSON.stringify(stored)).not.toContain(Buffer.from(keyText, "base64").toString("base64url"));
    }

    // A day later, the secrets rotated out before have expired: a rotation now signs with the new secret and
    // the one it replaced only.
    clock.offsetMs = DAY_MS + 60_000;
    try {
      const fourth = await rotate(caller, endpoint.id);
      const later = await deliveryFor(path, (await createReference(caller)).id);
      // The timestamp is a day ahead of this machine's time, so sign as standardwebhooks would and compare.
      const signedAt = new Date(Number(later.timestamp) * 1000);
      const signatureOf = (secret: string) => new Webhook(secret).sign(later.webhookId, signedAt, later.body);
      expect(later.signature.split(" ").sort()).toEqual([signatureOf(fourth), signatureOf(third)].sort());
    } finally {
      clock.offsetMs = 0;
    }
  });

  it("loses no secret to parallel rotations and updates of one endpoint", async () => {
    const { caller, path } = await setUp();
    const endpoint = await createEndpoint(caller, { url: receiver.url(path) });

    const results = await Promise.all(
      Array.from({ length: 10 }, (_, index) =>
        index % 2 === 0
          ? http(caller, "POST", `/v1/webhooks/${endpoint.id}/rotate-secret`)
          : http(caller, "PATCH", `/v1/webhooks/${endpoint.id}`, { body: { description: `edit ${index}` } }),
      ),
    );

    expect(results.map((result) => result.status)).toEqual(Array(10).fill(200));
    const issued = results.filter((_, index) => index % 2 === 0).map((result) => result.body.secret as string);
    const secrets = [endpoint.secret, ...issued];
    receiver.verifyWith(path, ...secrets);
    const delivery = await deliveryFor(path, (await createReference(caller)).id);
    // Every secret ever issued signs: the five rotations each kept the ones before, and no update wrote back
    // a secret it had read before a rotation.
    expect(delivery.signature.split(" ")).toHaveLength(6);
    expect([...delivery.verifiedBy].sort()).toEqual([...secrets].sort());
  });

  it("keeps plain-text secrets stored before encryption signing, and encrypts them when a server starts", async () => {
    const { caller, path } = await setUp();
    const endpoint = await createEndpoint(caller, { url: receiver.url(path) });
    const current = await rotate(caller, endpoint.id);
    // The row as the previous version wrote it: both secrets in plain text.
    await server.database.prisma.$executeRaw`
      UPDATE "webhook_endpoints" SET "secret" = ${current}, "previous_secret" = ${endpoint.secret}
      WHERE "id" = ${endpoint.id}`;

    receiver.verifyWith(path, endpoint.secret, current);
    const before = await deliveryFor(path, (await createReference(caller)).id);
    expect(before.verifiedBy).toEqual([endpoint.secret, current]);

    const restarted = await startInstanceOn(server, { env: { ...ENV, WEBHOOK_WORKER: "off" } });
    await restarted.close();
    const stored = await storedSecrets(endpoint.id);
    expect(stored.secret).toMatch(/^v1:/);
    expect(stored.previous_secret).toMatch(/^v1:/);
    expect(JSON.stringify(stored)).not.toContain(current.slice("whsec_".length));
    expect(JSON.stringify(stored)).not.toContain(endpoint.secret.slice("whsec_".length));

    const after = await deliveryFor(path, (await createReference(caller)).id);
    expect(after.verifiedBy).toEqual([endpoint.secret, current]);
  });
});

describe("the webhook secret key", () => {
  const folder = mkdtempSync(join(tmpdir(), "reftrail-secret-key-"));
  afterAll(() => rmSync(folder, { recursive: true, force: true }));

  it("is required in production, with a one-line message saying how to make one", async () => {
    const config = loadConfig({ NODE_ENV: "production", DATABASE_URL: `file:${join(folder, "prod.db")}` });
    expect(() => loadWebhookSecretKey(config)).toThrow(ConfigError);
    expect(() => loadWebhookSecretKey(config)).toThrow(/WEBHOOK_SECRET_KEY.*openssl rand -base64 32/);

    // The server itself refuses to start, before touching the database.
    const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
      cwd: resolve(import.meta.dirname, ".."),
      env: { ...process.env, NODE_ENV: "production", DATABASE_URL: `file:${join(folder, "prod.db")}`, PORT: "0" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((done) => child.once("exit", done));
    expect(code).toBe(1);
    expect(stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/^reftrail failed to start: WEBHOOK_SECRET_KEY .*openssl rand -base64 32/),
    ]);
    expect(() => statSync(join(folder, "prod.db"))).toThrow();
  });

  it("accepts 32 bytes as base64 or hex and refuses anything else", () => {
    const hex = "ab".repeat(32);
    expect(loadConfig({ WEBHOOK_SECRET_KEY: hex }).webhookSecretKey).toEqual(Buffer.from(hex, "hex"));
    const base64 = Buffer.alloc(32, 7).toString("base64");
    expect(loadConfig({ WEBHOOK_SECRET_KEY: base64 }).webhookSecretKey).toEqual(Buffer.alloc(32, 7));
    expect(() => loadConfig({ WEBHOOK_SECRET_KEY: Buffer.alloc(16).toString("base64") })).toThrow(ConfigError);
    expect(() => loadConfig({ WEBHOOK_SECRET_KEY: "not a key" })).toThrow(ConfigError);
  });

  it("is created beside the SQLite file in development, readable by its owner only, and reused", () => {
    const config = loadConfig({ NODE_ENV: "development", DATABASE_URL: `file:${join(folder, "dev", "app.db")}` });
    expect(config.webhookSecretKeyFile).toBe(join(folder, "dev", "webhook-secret.key"));
    const key = loadWebhookSecretKey(config);
    expect(key).toHaveLength(32);
    expect(statSync(config.webhookSecretKeyFile).mode & 0o777).toBe(0o600);
    expect(Buffer.from(readFileSync(config.webhookSecretKeyFile, "utf8").trim(), "base64")).toEqual(key);
    expect(loadWebhookSecretKey(config)).toEqual(key);

    const postgres = loadConfig({ NODE_ENV: "development", DATABASE_URL: "postgresql://localhost/reftrail" });
    expect(postgres.webhookSecretKeyFile).toBe(resolve("data", "webhook-secret.key"));
  });

  it("encrypts with a fresh IV each time and refuses a tampered value or another key", () => {
    const cipher = new SecretCipher(Buffer.alloc(32, 1));
    const one = cipher.encrypt("whsec_c2VjcmV0");
    const two = cipher.encrypt("whsec_c2VjcmV0");
    expect(one).not.toBe(two);
    expect(cipher.decrypt(one)).toBe("whsec_c2VjcmV0");
    const [version, iv, tag, ciphertext] = one.split(":");
    const flipped = Buffer.from(ciphertext!, "base64url");
    flipped[0]! ^= 1;
    expect(() => cipher.decrypt([version, iv, tag, flipped.toString("base64url")].join(":"))).toThrow();
    expect(() => new SecretCipher(Buffer.alloc(32, 2)).decrypt(one)).toThrow();
    // Plain text from before encryption is read as it is.
    expect(cipher.decrypt("whsec_c2VjcmV0")).toBe("whsec_c2VjcmV0");
  });
});
