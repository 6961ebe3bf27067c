import { createPublicKey, verify } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { gql, gqlData } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver, type ReceivedWebhook } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, type Caller } from "./support/webhooks.ts";

/*
 * Asymmetric signatures (SPEC §9.3, issue 38): an endpoint created with `signing: "ed25519"` signs each request
 * `v1a,<base64 ed25519 signature of id.timestamp.body>` with a private key that never leaves the server (stored
 * encrypted), and shows its public key (`whpk_` + base64 of the raw 32 bytes). A receiver verifies with node:crypto
 * alone, before and during a rotation (the key rotated out keeps signing beside the new one).
 */

const ENV = { WEBHOOK_RETRY_SCHEDULE: "0s,150ms", WEBHOOK_POLL_INTERVAL: "50ms" };
/** The DER prefix that makes a raw 32-byte ed25519 public key an SPKI document. */
const SPKI_ED25519_PREFIX = Buffer.from("302a300506032b6570032100", "hex");

/** What a receiver does with the endpoint's public key and nothing else: is one `v1a` signature its own? */
function verifiesWith(publicKey: string, hook: ReceivedWebhook): boolean {
  expect(publicKey).toMatch(/^whpk_/);
  const raw = Buffer.from(publicKey.slice("whpk_".length), "base64");
  expect(raw).toHaveLength(32);
  const key = createPublicKey({ key: Buffer.concat([SPKI_ED25519_PREFIX, raw]), format: "der", type: "spki" });
  const signed = Buffer.from(`${hook.webhookId}.${hook.timestamp}.${hook.body}`);
  return hook.signature
    .split(" ")
    .filter((part) => part.startsWith("v1a,"))
    .some((part) => verify(null, signed, key, Buffer.from(part.slice("v1a,".length), "base64")));
}

describe.each(DATABASE_KINDS)("ed25519 signatures on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  let organizations = 0;

  async function caller(): Promise<Caller> {
    const { apiKey } = await server.newOrganization(`ed25519-${++organizations}`);
    return { url: server.url, apiKey };
  }

  function deliveryFor(path: string, referenceId: string): Promise<ReceivedWebhook> {
    return receiver.waitFor(() => receiver.on(path).find((hook) => hook.json?.reference_id === referenceId));
  }

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, { env: ENV });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("signs v1a with a private key it never shows, verifiable with the public key before and during a rotation", async () => {
    const organization = await caller();
    const path = `/${kind}/ed25519/rest`;
    const created = await createEndpoint(organization, { url: receiver.url(path), signing: "ed25519" });
    expect(created.signing).toBe("ed25519");
    expect(created.secret).toBeNull();
    const firstKey: string = created.public_key;
    const read = await http(organization, "GET", `/v1/webhooks/${created.id}`);
    expectStatus(read, 200);
    expect(read.body).toMatchObject({ signing: "ed25519", public_key: firstKey });
    expect(JSON.stringify(read.body)).not.toContain("whsk_");

    // The private key is stored encrypted, like a signing secret: the column holds no key in the clear.
    const [stored] = await server.database.prisma.$queryRaw<{ secret: string; public_key: string }[]>`
      SELECT "secret", "public_key" FROM "webhook_endpoints" WHERE "id" = ${created.id}`;
    expect(stored!.secret).toMatch(/^v1:/);
    expect(stored!.secret).not.toContain("whsk_");
    expect(stored!.public_key).toBe(firstKey);

    const before = await deliveryFor(path, (await createReference(organization)).id);
    expect(before.signature).toMatch(/^v1a,[A-Za-z0-9+/]+={0,2}$/);
    expect(verifiesWith(firstKey, before)).toBe(true);

    const rotated = await http(organization, "POST", `/v1/webhooks/${created.id}/rotate-secret`);
    expectStatus(rotated, 200);
    expect(rotated.body.secret).toBeNull();
    const secondKey: string = rotated.body.public_key;
    expect(secondKey).not.toBe(firstKey);
    expect(rotated.body.previous_secret_expires_at).not.toBeNull();

    // During the rotation both keys sign: a receiver still holding the old public key and one holding the new
    // one both accept the request.
    const during = await deliveryFor(path, (await createReference(organization)).id);
    expect(during.signature.split(" ")).toHaveLength(2);
    expect(verifiesWith(firstKey, during)).toBe(true);
    expect(verifiesWith(secondKey, during)).toBe(true);
    // A signature does not verify with a key it was not made with.
    expect(verifiesWith(secondKey, before)).toBe(false);
  }, 60_000);

  it("keeps signing as created: the same value is accepted on update, another one refused with a pointer", async () => {
    const organization = await caller();
    const created = await createEndpoint(organization, { url: receiver.url(`/${kind}/ed25519/fixed`) });
    expect(created).toMatchObject({ signing: "hmac-sha256", public_key: null });
    expect(created.secret).toMatch(/^whsec_/);

    const refused = await http(organization, "PATCH", `/v1/webhooks/${created.id}`, { body: { signing: "ed25519" } });
    expectStatus(refused, 422);
    expect(refused.body.errors).toEqual([expect.objectContaining({ pointer: "/signing", code: "IMMUTABLE" })]);
    const same = await http(organization, "PATCH", `/v1/webhooks/${created.id}`, {
      body: { signing: "hmac-sha256", description: "same signing" },
    });
    expectStatus(same, 200);
    expect(same.body).toMatchObject({ signing: "hmac-sha256", description: "same signing" });

    const unknown = await http(organization, "POST", "/v1/webhooks", {
      body: { url: receiver.url(`/${kind}/ed25519/unknown`), signing: "rsa" },
    });
    expectStatus(unknown, 422);
    expect(unknown.body.errors[0].pointer).toBe("/signing");
  }, 30_000);

  it("creates and rotates ed25519 endpoints through GraphQL, with the same keys a receiver verifies", async () => {
    const organization = await caller();
    const path = `/${kind}/ed25519/graphql`;
    const created = await gqlData(
      organization,
      `mutation($url: String!) {
        createWebhookEndpoint(input: { url: $url, signing: ED25519 }) {
          secret webhookEndpoint { id signing publicKey }
        }
      }`,
      { url: receiver.url(path) },
    );
    const { secret, webhookEndpoint } = created.createWebhookEndpoint;
    expect(secret).toBeNull();
    expect(webhookEndpoint.signing).toBe("ED25519");
    const delivered = await deliveryFor(path, (await createReference(organization)).id);
    expect(verifiesWith(webhookEndpoint.publicKey, delivered)).toBe(true);

    const rotated = await gqlData(
      organization,
      `mutation($id: ID!) { rotateWebhookEndpointSecret(input: { id: $id }) { secret webhookEndpoint { publicKey } } }`,
      { id: webhookEndpoint.id },
    );
    expect(rotated.rotateWebhookEndpointSecret.secret).toBeNull();
    const newKey = rotated.rotateWebhookEndpointSecret.webhookEndpoint.publicKey;
    const during = await deliveryFor(path, (await createReference(organization)).id);
    expect(verifiesWith(webhookEndpoint.publicKey, during)).toBe(true);
    expect(verifiesWith(newKey, during)).toBe(true);

    const refused = await gql(
      organization,
      `mutation($id: ID!) { updateWebhookEndpoint(input: { id: $id, signing: HMAC_SHA256 }) { webhookEndpoint { id } } }`,
      { id: webhookEndpoint.id },
    );
    expect(refused.body.errors?.[0]?.extensions).toMatchObject({ code: "VALIDATION_FAILED", field: "input.signing" });
  }, 60_000);
});
