import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { containerNumber } from "./support/container-numbers.ts";
import { expectEventually } from "./support/expect-eventually.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer, type DatabaseKind } from "./support/test-server.ts";

/*
 * When the webhook worker claims (src/webhooks/webhook-runtime.ts): a commit wakes it only when the commit queued
 * deliveries. The poll is set to ten minutes, so every claim seen here was started by a wake-up; claims are
 * counted as the statements that take a lease.
 */

const CLAIM = /UPDATE "webhook_deliveries" SET "lease_owner" =/;

async function startCountingClaims(kind: DatabaseKind): Promise<{ server: TestServer; claims: () => number }> {
  let claims = 0;
  const server = await startTestServer(kind, {
    onQuery: (sql) => {
      if (CLAIM.test(sql)) claims += 1;
    },
    env: { WEBHOOK_POLL_INTERVAL: "10m" },
  });
  return { server, claims: () => claims };
}

async function createReference(server: TestServer, serial: number): Promise<string> {
  const created = await http(server, "POST", "/v1/references", {
    body: { container_id: containerNumber("WAKU", serial), carrier_code: "MSCU" },
  });
  expectStatus(created, 201);
  return created.body.reference.id as string;
}

const recordExtraction = (server: TestServer, referenceId: string) =>
  http(server, "POST", `/v1/references/${referenceId}/extractions`, { body: { status: "succeeded" } });

describe.each(DATABASE_KINDS)("the webhook worker's wake-ups on %s", (kind) => {
  let server: TestServer;
  let claims: () => number;

  beforeAll(async () => {
    ({ server, claims } = await startCountingClaims(kind));
  });

  afterAll(async () => {
    await server.close();
  });

  it("claims at once after a commit that queued a delivery, with no poll to wait for", async () => {
    const endpoint = await http(server, "POST", "/v1/webhooks", { body: { url: "http://127.0.0.1:9/hooks" } });
    expectStatus(endpoint, 201);
    const referenceId = await createReference(server, 1);
    const before = claims();
    expectStatus(await recordExtraction(server, referenceId), 201);
    await expectEventually(claims, (count) => expect(count).toBeGreaterThan(before));
  });
});

// SQLite only: on PostgreSQL every commit also arrives as a NOTIFY, which may come from another instance and so
// always wakes the worker.
describe("the webhook worker's wake-ups on sqlite, without endpoints", () => {
  let server: TestServer;
  let claims: () => number;

  beforeAll(async () => {
    ({ server, claims } = await startCountingClaims("sqlite"));
  });

  afterAll(async () => {
    await server.close();
  });

  it("does not claim after commits that queued no delivery", async () => {
    const referenceId = await createReference(server, 2);
    // The start's own claim has been sent by the time the first request is answered.
    const before = claims();
    for (let index = 0; index < 20; index++) expectStatus(await recordExtraction(server, referenceId), 201);
    // A wake-up claims in the commit's own turn: one more request answered means any claim would have been sent.
    expectStatus(await http(server, "GET", `/v1/references/${referenceId}`), 200);
    expect(claims()).toBe(before);
  });
});
