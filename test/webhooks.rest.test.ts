import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Webhook } from "standardwebhooks";
import { http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { NEVER, WebhookReceiver } from "./support/webhook-receiver.ts";
import {
  createEndpoint,
  createReference,
  eventually,
  getDelivery,
  listDeliveries,
  OffsetClock,
  type Caller,
} from "./support/webhooks.ts";

/*
 * SPEC §9 through the REST surface, delivering to a real receiver on loopback that verifies every signature
 * with the independent `standardwebhooks` package. The retry schedule is compressed (0s, 150ms, 300ms), so
 * retries take milliseconds; the clock is the system time plus an offset the rotation test moves by a day. The
 * timeout (2 s) is far above what the loopback receiver needs even on a busy machine: a request that timed out is
 * sent again, and the tests that count deliveries expect exactly one each.
 * Each test works in its own organization, so that no endpoint sees another test's events.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const ENV = {
  WEBHOOK_RETRY_SCHEDULE: "0s,150ms,300ms",
  WEBHOOK_TIMEOUT: "2s",
  WEBHOOK_LEASE: "5s",
  WEBHOOK_POLL_INTERVAL: "50ms",
  WEBHOOK_DISABLE_AFTER: "1h",
};

describe.each(DATABASE_KINDS)("webhooks over REST on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  const clock = new OffsetClock();
  let paths = 0;

  /** A fresh organization and a fresh receiver path. */
  async function setUp(): Promise<{ caller: Caller; organizationId: string; path: string }> {
    const { organizationId, apiKey } = await server.newOrganization(`hooks-${++paths}`);
    return { caller: { url: server.url, apiKey }, organizationId, path: `/${kind}/${paths}` };
  }

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, { env: ENV, clock });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("manages endpoints: the secret is shown at creation only, inputs are validated, other organizations see nothing", async () => {
    const { caller, path } = await setUp();
    const created = await createEndpoint(caller, {
      url: receiver.url(path),
      event_types: ["reference_created"],
      description: "  ops  ",
    });
    expect(created).toMatchObject({
      url: receiver.url(path),
      event_types: ["reference_created"],
      description: "ops",
      enabled: true,
      disabled_reason: null,
      failing_since: null,
    });
    expect(created.id).toMatch(UUID);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(created.secret.slice(6), "base64")).toHaveLength(32);

    const read = await http(caller, "GET", `/v1/webhooks/${created.id}`);
    expect(read.status).toBe(200);
    expect(read.body).not.toHaveProperty("secret");
    expect(JSON.stringify(read.body)).not.toContain(created.secret.slice(6));
    const listed = await http(caller, "GET", "/v1/webhooks");
    expect(listed.body.data.map((endpoint: any) => endpoint.id)).toEqual([created.id]);
    expect(JSON.stringify(listed.body)).not.toContain(created.secret.slice(6));

    const patched = await http(caller, "PATCH", `/v1/webhooks/${created.id}`, {
      body: { url: receiver.url(`${path}/v2`), event_types: null, description: null, enabled: false },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({
      url: receiver.url(`${path}/v2`),
      event_types: null,
      description: null,
      enabled: false,
    });

    const invalid = await http(caller, "POST", "/v1/webhooks", {
      body: { url: "ftp://example.com/hook", event_types: ["nope"] },
    });
    expect(invalid.status).toBe(422);
    expect(invalid.body.code).toBe("VALIDATION_FAILED");
    expect(invalid.body.errors.map((error: any) => error.pointer)).toContain("/event_types/0");
    for (const url of [
      "ftp://example.com/hook",
      "https://user:pass@example.com/hook",
      "not a url",
      "https://example.com/#x",
    ]) {
      const refused = await http(caller, "POST", "/v1/webhooks", { body: { url } });
      expect({ url, status: refused.status, pointer: refused.body.errors?.[0]?.pointer }).toEqual({
        url,
        status: 422,
        pointer: "/url",
      });
    }
    expect(
      (await http(caller, "POST", "/v1/webhooks", { body: { url: receiver.url(path), event_types: [] } })).status,
    ).toBe(422);

    const other = { url: server.url, apiKey: server.apiKey };
    expect((await http(other, "GET", `/v1/webhooks/${created.id}`)).status).toBe(404);
    expect((await http(other, "PATCH", `/v1/webhooks/${created.id}`, { body: { enabled: true } })).status).toBe(404);
    expect((await http(other, "POST", `/v1/webhooks/${created.id}/rotate-secret`)).status).toBe(404);
    expect((await http(other, "DELETE", `/v1/webhooks/${created.id}`)).status).toBe(404);
    expect((await http(other, "GET", `/v1/webhooks/${created.id}/deliveries`)).status).toBe(404);

    expect((await http(caller, "DELETE", `/v1/webhooks/${created.id}`)).status).toBe(204);
    expect((await http(caller, "GET", `/v1/webhooks/${created.id}`)).status).toBe(404);
    expect((await http(caller, "GET", `/v1/webhooks/not-an-id`)).status).toBe(404);
  });

  it("delivers every event type once per matching endpoint, signed, with the body of SPEC §9", async () => {
    const { caller, organizationId, path } = await setUp();
    const all = await createEndpoint(caller, { url: receiver.url(`${path}/all`) });
    const filtered = await createEndpoint(caller, {
      url: receiver.url(`${path}/failures`),
      event_types: ["extraction_failed"],
    });
    await createEndpoint(caller, { url: receiver.url(`${path}/off`), enabled: false });
    receiver.verifyWith(`${path}/all`, all.secret);
    receiver.verifyWith(`${path}/failures`, filtered.secret);

    const reference = await createReference(caller, { tags: [{ name: "hooks" }] });
    const id = reference.id;
    expect(
      (await http(caller, "POST", `/v1/references/${id}/extractions`, { body: { status: "succeeded" } })).status,
    ).toBe(201);
    await http(caller, "POST", `/v1/references/${id}/tags`, { body: { tags: [{ name: "Second" }] } });
    await http(caller, "POST", `/v1/references/${id}/extractions`, {
      body: { status: "failed", error: { code: "TIMEOUT", message: "slow carrier" } },
    });
    await http(caller, "POST", `/v1/references/${id}/updates`, {
      body: {
        estimated_departure: "2026-12-01T08:00:00+01:00",
        estimated_arrival: "2026-12-20T00:00:00Z",
        vessel: "EVER GIVEN",
      },
    });
    await http(caller, "POST", `/v1/references/${id}/deactivate`, { body: { reason: "data_not_found" } });
    await http(caller, "POST", `/v1/references/${id}/reactivate`);

    const log = (await http(caller, "GET", `/v1/references/${id}/events`)).body.data as any[];
    expect(new Set(log.map((event) => event.type)).size).toBe(8);
    const hooks = await receiver.waitForCount(`${path}/all`, log.length);
    await receiver.waitForCount(`${path}/failures`, 1);

    const tagsNow = (await http(caller, "GET", `/v1/references/${id}`)).body.tags;
    expect(hooks).toHaveLength(log.length);
    for (const event of log) {
      const matching = hooks.filter((hook) => hook.json.id === event.id);
      expect({ type: event.type, deliveries: matching.length }).toEqual({ type: event.type, deliveries: 1 });
      const hook = matching[0]!;
      expect(hook.verifiedBy).toEqual([all.secret]);
      expect(hook.webhookId).toMatch(UUID);
      expect(hook.headers["content-type"]).toBe("application/json");
      expect(hook.headers["user-agent"]).toMatch(/^reftrail-webhooks\/\d+\.\d+\.\d+/);
      expect(Math.abs(Number(hook.timestamp) - Date.now() / 1000)).toBeLessThan(60);
      expect(Object.keys(hook.json).sort()).toEqual(
        ["id", "type", "occurred_at", "reference_id", "organization_id", "reference_tags", "status", "payload"].sort(),
      );
      expect(hook.json).toMatchObject({
        type: event.type,
        occurred_at: event.occurred_at,
        reference_id: id,
        organization_id: organizationId,
        status: "data_received",
      });
      expect(hook.json.payload).toEqual(event.detail);
      // Tags as they were when the event was written: only "hooks" before the second tag was added.
      const expectedTags =
        event.type === "reference_created" || event.type === "extraction_succeeded"
          ? tagsNow.filter((t: any) => t.name === "hooks")
          : tagsNow;
      expect(hook.json.reference_tags).toEqual(expectedTags);
    }
    expect(new Set(hooks.map((hook) => hook.webhookId)).size).toBe(hooks.length);

    const failures = receiver.on(`${path}/failures`);
    expect(failures).toHaveLength(1);
    expect(failures[0]!.json.type).toBe("extraction_failed");
    expect(failures[0]!.verifiedBy).toEqual([filtered.secret]);
    expect(failures[0]!.webhookId).not.toBe(hooks.find((hook) => hook.json.type === "extraction_failed")!.webhookId);
    expect(receiver.on(`${path}/off`)).toHaveLength(0);

    const deliveries = await eventually(
      async () => {
        const rows = await listDeliveries(caller, all.id);
        return rows.every((row) => row.status === "succeeded") && rows.length === log.length ? rows : null;
      },
      5_000,
      "deliveries to be recorded as succeeded",
    );
    // Newest first; each delivery's id is the webhook-id its requests carried.
    expect(deliveries.map((row) => row.id)).toEqual([...deliveries.map((row) => row.id)].sort().reverse());
    expect(new Set(deliveries.map((row) => row.id))).toEqual(new Set(hooks.map((hook) => hook.webhookId)));
    const one = await getDelivery(caller, all.id, deliveries[0].id);
    expect(one).toMatchObject({ status: "succeeded", attempt_count: 1, next_attempt_at: null, endpoint_id: all.id });
    expect(one.body).toEqual(hooks.find((hook) => hook.webhookId === one.id)!.json);
    expect(one.attempts).toHaveLength(1);
    expect(one.attempts[0]).toMatchObject({ status_code: 200, error: null, response_body: "ok" });
    expect(one.attempts[0].latency_ms).toBeGreaterThanOrEqual(0);

    const firstPage = await http(caller, "GET", `/v1/webhooks/${all.id}/deliveries?limit=3`);
    const secondPage = await http(
      caller,
      "GET",
      `/v1/webhooks/${all.id}/deliveries?limit=3&cursor=${firstPage.body.next_cursor}`,
    );
    expect(secondPage.body.data[0].id < firstPage.body.data[2].id).toBe(true);
    expect((await http(caller, "GET", `/v1/webhooks/${all.id}/deliveries?status=bogus`)).status).toBe(400);
    expect(await listDeliveries(caller, all.id, "?status=failed")).toEqual([]);
  });

  it("retries failures on the schedule with the same webhook-id and body, and logs every attempt", async () => {
    const { caller, path } = await setUp();
    const big = "x".repeat(5_000);
    receiver.respond(path, ({ count }) => (count <= 2 ? { status: 500, body: big } : { status: 204, body: "" }));
    const endpoint = await createEndpoint(caller, { url: receiver.url(path) });
    receiver.verifyWith(path, endpoint.secret);
    await createReference(caller);

    const hooks = await receiver.waitForCount(path, 3);
    expect(new Set(hooks.map((hook) => hook.webhookId)).size).toBe(1);
    expect(new Set(hooks.map((hook) => hook.body)).size).toBe(1);
    for (const hook of hooks) expect(hook.verifiedBy).toEqual([endpoint.secret]);
    // Delays of 150 ms and 300 ms, each ±20% jitter: no retry comes before its delay (a busy machine may
    // make it later, never earlier).
    const firstGap = hooks[1]!.receivedAt - hooks[0]!.receivedAt;
    const secondGap = hooks[2]!.receivedAt - hooks[1]!.receivedAt;
    expect(firstGap).toBeGreaterThanOrEqual(110);
    expect(secondGap).toBeGreaterThanOrEqual(230);

    const [delivery] = await eventually(async () => {
      const rows = await listDeliveries(caller, endpoint.id);
      return rows[0]?.status === "succeeded" ? rows : null;
    });
    const detail = await getDelivery(caller, endpoint.id, delivery.id);
    expect(detail.attempt_count).toBe(3);
    expect(detail.attempts.map((attempt: any) => attempt.status_code)).toEqual([500, 500, 204]);
    expect(detail.attempts[0].response_body).toBe("x".repeat(2_048));
    expect(detail.attempts[2].response_body).toBe("");
    const times = detail.attempts.map((attempt: any) => Date.parse(attempt.attempted_at));
    expect(times[1] - times[0]).toBeGreaterThanOrEqual(110);
    expect(times[2] - times[1]).toBeGreaterThanOrEqual(230);
  });

  it("gives up after the last attempt of the schedule", async () => {
    const { caller, path } = await setUp();
    receiver.respond(path, () => ({ status: 500 }));
    const endpoint = await createEndpoint(caller, { url: receiver.url(path) });
    await createReference(caller);
    const [failed] = await eventually(async () => {
      const rows = await listDeliveries(caller, endpoint.id);
      return rows[0]?.status === "failed" ? rows : null;
    });
    expect(failed).toMatchObject({ attempt_count: 3, next_attempt_at: null });
    expect(receiver.on(path)).toHaveLength(3);
    // One delivery failing for half a second is not "failing for an hour": the endpoint stays enabled.
    expect((await http(caller, "GET", `/v1/webhooks/${endpoint.id}`)).body).toMatchObject({ enabled: true });
  });

  it("counts every attempt across a re-send, which starts the retry schedule again", async () => {
    const { caller, path } = await setUp();
    receiver.respond(path, () => ({ status: 500 }));
    const endpoint = await createEndpoint(caller, { url: receiver.url(path) });
    await createReference(caller);
    const [failed] = await eventually(async () => {
      const rows = await listDeliveries(caller, endpoint.id);
      return rows[0]?.status === "failed" ? rows : null;
    });
    expect(failed).toMatchObject({ attempt_count: 3 });
    expect((await getDelivery(caller, endpoint.id, failed.id)).attempts).toHaveLength(3);

    const resent = await http(caller, "POST", `/v1/webhooks/${endpoint.id}/deliveries/${failed.id}/resend`);
    expect(resent.status).toBe(202);
    // The count is not reset: it is still the three attempts listed.
    expect(resent.body).toMatchObject({ status: "pending", attempt_count: 3 });
    // The re-send gets the whole schedule again (three attempts, not one), and each is counted.
    const settled = await eventually(async () => {
      const detail = await getDelivery(caller, endpoint.id, failed.id);
      return detail.status === "failed" ? detail : null;
    });
    expect(settled.attempt_count).toBe(6);
    expect(settled.attempts.map((attempt: any) => attempt.status_code)).toEqual([500, 500, 500, 500, 500, 500]);
    expect(receiver.on(path)).toHaveLength(6);
  });

  it("counts timeouts, connection errors and redirects as failed attempts", async () => {
    const { caller, path } = await setUp();
    receiver.respond(`${path}/slow`, () => ({ until: NEVER }));
    receiver.respond(`${path}/redirect`, () => ({
      status: 302,
      headers: { location: receiver.url(`${path}/elsewhere`) },
    }));
    const slow = await createEndpoint(caller, { url: receiver.url(`${path}/slow`) });
    const redirect = await createEndpoint(caller, { url: receiver.url(`${path}/redirect`) });
    const refused = await createEndpoint(caller, { url: "http://127.0.0.1:1/hook" });
    await createReference(caller);

    const firstAttempt = async (endpointId: string) =>
      eventually(async () => {
        const [delivery] = await listDeliveries(caller, endpointId);
        if (!delivery || delivery.attempt_count < 1) return null;
        return (await getDelivery(caller, endpointId, delivery.id)).attempts[0];
      });
    const timedOut = await firstAttempt(slow.id);
    expect(timedOut).toMatchObject({ status_code: null, error: "timed out after 2000 ms" });
    expect(timedOut.latency_ms).toBeGreaterThanOrEqual(1990);
    expect(await firstAttempt(redirect.id)).toMatchObject({ status_code: 302, error: "redirects are not followed" });
    expect((await firstAttempt(refused.id)).error).toMatch(/ECONNREFUSED/);
    expect(receiver.on(`${path}/elsewhere`)).toHaveLength(0);
    for (const endpoint of [slow, redirect, refused]) await http(caller, "DELETE", `/v1/webhooks/${endpoint.id}`);
  });

  it("disables an endpoint that answers 410 Gone and stops sending to it", async () => {
    const { caller, path } = await setUp();
    receiver.respond(path, () => ({ status: 410 }));
    const endpoint = await createEndpoint(caller, { url: receiver.url(path) });
    await createReference(caller);
    const disabled = await eventually(async () => {
      const read = (await http(caller, "GET", `/v1/webhooks/${endpoint.id}`)).body;
      return read.enabled === false ? read : null;
    });
    expect(disabled.disabled_reason).toMatch(/410/);
    const [delivery] = await listDeliveries(caller, endpoint.id);
    expect(delivery).toMatchObject({ status: "failed", attempt_count: 1 });

    await createReference(caller);
    expect(await listDeliveries(caller, endpoint.id)).toHaveLength(1);
    expect((await http(caller, "POST", `/v1/webhooks/${endpoint.id}/test`)).status).toBe(409);
    expect((await http(caller, "POST", `/v1/webhooks/${endpoint.id}/deliveries/${delivery.id}/resend`)).status).toBe(
      409,
    );
    expect(receiver.on(path)).toHaveLength(1);

    // Enabling it again clears the reason.
    const enabled = await http(caller, "PATCH", `/v1/webhooks/${endpoint.id}`, { body: { enabled: true } });
    expect(enabled.body).toMatchObject({ enabled: true, disabled_reason: null, failing_since: null });
  });

  it("honours Retry-After on 429 and 503", async () => {
    const { caller, path } = await setUp();
    receiver.respond(path, ({ count }) =>
      count === 1
        ? { status: 429, headers: { "retry-after": "1" } }
        : count === 2
          ? { status: 503, headers: { "retry-after": "1" } }
          : { status: 200 },
    );
    await createEndpoint(caller, { url: receiver.url(path) });
    await createReference(caller);
    const hooks = await receiver.waitForCount(path, 3, 8_000);
    // The schedule alone would come back after 150 ms and 300 ms.
    expect(hooks[1]!.receivedAt - hooks[0]!.receivedAt).toBeGreaterThanOrEqual(990);
    expect(hooks[2]!.receivedAt - hooks[1]!.receivedAt).toBeGreaterThanOrEqual(990);
  });

  it("signs with both secrets for 24 hours after a rotation, then with the new one only", async () => {
    const { caller, path } = await setUp();
    const endpoint = await createEndpoint(caller, { url: receiver.url(path) });
    const rotated = await http(caller, "POST", `/v1/webhooks/${endpoint.id}/rotate-secret`);
    expect(rotated.status).toBe(200);
    const newSecret = rotated.body.secret as string;
    expect(newSecret).toMatch(/^whsec_/);
    expect(newSecret).not.toBe(endpoint.secret);
    expect(Date.parse(rotated.body.previous_secret_expires_at) - clock.now().getTime()).toBeGreaterThan(
      23.9 * 3_600_000,
    );
    expect((await http(caller, "GET", `/v1/webhooks/${endpoint.id}`)).body).not.toHaveProperty("secret");

    receiver.verifyWith(path, endpoint.secret, newSecret);
    await createReference(caller);
    const [during] = await receiver.waitForCount(path, 1);
    expect(during!.signature.split(" ")).toHaveLength(2);
    // Each secret alone verifies the request, as a receiver that knows only one of them would.
    expect(during!.verifiedBy).toEqual([endpoint.secret, newSecret]);

    clock.offsetMs = 24 * 3_600_000 + 60_000;
    try {
      await createReference(caller);
      const after = (await receiver.waitForCount(path, 2))[1]!;
      expect(after.signature.split(" ")).toHaveLength(1);
      // The timestamp is a day ahead of this machine's time, so check the signature as standardwebhooks signs it.
      const signedAt = new Date(Number(after.timestamp) * 1000);
      expect(after.signature).toBe(new Webhook(newSecret).sign(after.webhookId, signedAt, after.body));
      expect(after.signature).not.toBe(new Webhook(endpoint.secret).sign(after.webhookId, signedAt, after.body));
    } finally {
      clock.offsetMs = 0;
    }
  });

  it("sends a test event and re-sends a delivery by hand with the same webhook-id and body", async () => {
    const { caller, organizationId, path } = await setUp();
    const endpoint = await createEndpoint(caller, { url: receiver.url(path), event_types: ["reference_deactivated"] });
    receiver.verifyWith(path, endpoint.secret);
    const queued = await http(caller, "POST", `/v1/webhooks/${endpoint.id}/test`);
    expect(queued.status).toBe(202);
    expect(queued.body).toMatchObject({ event_type: "webhook_test", status: "pending", endpoint_id: endpoint.id });

    const [test] = await receiver.waitForCount(path, 1);
    expect(test!.verifiedBy).toEqual([endpoint.secret]);
    expect(test!.webhookId).toBe(queued.body.id);
    expect(test!.json).toMatchObject({
      type: "webhook_test",
      status: "test",
      reference_id: null,
      organization_id: organizationId,
      reference_tags: [],
      payload: { webhook_endpoint_id: endpoint.id, organization_id: organizationId },
    });

    await eventually(async () => (await getDelivery(caller, endpoint.id, queued.body.id)).status === "succeeded");
    const resent = await http(caller, "POST", `/v1/webhooks/${endpoint.id}/deliveries/${queued.body.id}/resend`);
    expect(resent.status).toBe(202);
    const [, again] = await receiver.waitForCount(path, 2);
    expect(again!.webhookId).toBe(test!.webhookId);
    expect(again!.body).toBe(test!.body);
    expect(again!.verifiedBy).toEqual([endpoint.secret]);
    const detail = await eventually(async () => {
      const read = await getDelivery(caller, endpoint.id, queued.body.id);
      return read.attempts.length === 2 && read.status === "succeeded" ? read : null;
    });
    expect(detail.attempts.map((attempt: any) => attempt.status_code)).toEqual([200, 200]);
    expect(
      (await http(caller, "POST", `/v1/webhooks/${endpoint.id}/deliveries/${crypto.randomUUID()}/resend`)).status,
    ).toBe(404);
  });

  it("reports webhook metrics", async () => {
    const metrics = await http({ url: server.url, apiKey: null as unknown as string }, "GET", "/metrics", {
      apiKey: null,
    });
    expect(metrics.status).toBe(200);
    for (const name of [
      "reftrail_webhook_deliveries_sent_total",
      "reftrail_webhook_deliveries_failed_total",
      "reftrail_webhook_delivery_retries_total",
      "reftrail_webhook_queue_depth",
    ]) {
      expect(metrics.body).toContain(name);
    }
    expect(metrics.body).toMatch(/reftrail_webhook_deliveries_sent_total\{event_type="reference_created"\} [1-9]/);
    expect(metrics.body).toMatch(/reftrail_webhook_delivery_retries_total [1-9]/);
  });
});

describe.each(DATABASE_KINDS)("webhook endpoints that are slow or failing on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    // Eight attempts 100 ms apart, an endpoint is disabled once it has failed for 400 ms, and at most two
    // requests at a time go to one endpoint.
    server = await startTestServer(kind, {
      env: {
        WEBHOOK_RETRY_SCHEDULE: "0s,100ms,100ms,100ms,100ms,100ms,100ms,100ms",
        WEBHOOK_DISABLE_AFTER: "400ms",
        WEBHOOK_POLL_INTERVAL: "50ms",
        WEBHOOK_CONCURRENCY_PER_ENDPOINT: "2",
        // Longer than the slow endpoint is held, however busy the machine: its requests must not time out.
        WEBHOOK_TIMEOUT: "50s",
        // A lease must outlast a request (the configuration refuses less).
        WEBHOOK_LEASE: "60s",
      },
    });
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("keeps delivering to healthy endpoints while one endpoint is slow", async () => {
    const { apiKey } = await server.newOrganization("slow");
    const caller = { url: server.url, apiKey };
    let answerSlow!: () => void;
    const slowAnswers = new Promise<void>((resolve) => (answerSlow = resolve));
    receiver.respond("/slow", () => ({ until: slowAnswers }));
    await createEndpoint(caller, { url: receiver.url("/slow") });
    await createEndpoint(caller, { url: receiver.url("/fast") });
    for (let index = 0; index < 10; index++) await createReference(caller);

    // The slow endpoint's requests stay unanswered until the fast one has received all ten: the order
    // itself shows that a slow endpoint holds only its own two slots.
    await receiver.waitForCount("/slow", 2, 30_000);
    await receiver.waitForCount("/fast", 10, 30_000);
    expect(receiver.on("/slow")).toHaveLength(2);
    answerSlow();
    // Answered, the slow endpoint gets the rest of its deliveries.
    await receiver.waitForCount("/slow", 10, 30_000);
  });

  it("disables the endpoint with a recorded reason and fails what was waiting for it", async () => {
    receiver.respond("/down", () => ({ status: 500 }));
    const endpoint = await createEndpoint(server, { url: receiver.url("/down") });
    await createReference(server);
    await createReference(server);
    const disabled = await eventually(async () => {
      const read = (await http(server, "GET", `/v1/webhooks/${endpoint.id}`)).body;
      return read.enabled === false ? read : null;
    });
    expect(disabled.disabled_reason).toBe("Every delivery attempt failed for 400 ms");
    expect(disabled.failing_since).not.toBeNull();
    const deliveries = await eventually(async () => {
      const rows = await listDeliveries(server, endpoint.id);
      return rows.every((row) => row.status === "failed") ? rows : null;
    });
    expect(deliveries).toHaveLength(2);
    // Fewer attempts than the schedule allows: the endpoint was disabled first.
    expect(deliveries.map((row) => row.attempt_count).reduce((a, b) => a + b)).toBeLessThan(16);
    // A later event reaches a healthy endpoint of the same organization; the disabled one gets nothing more.
    const seen = receiver.on("/down").length;
    await createEndpoint(server, { url: receiver.url("/after-down") });
    await createReference(server);
    await receiver.waitForCount("/after-down", 1, 30_000);
    expect(receiver.on("/down")).toHaveLength(seen);
    expect(await listDeliveries(server, endpoint.id)).toHaveLength(2);
  });
});

describe("webhook endpoint targets", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer("sqlite", { env: { WEBHOOK_ALLOWED_CIDRS: "", WEBHOOK_BROKER_ALLOWED_CIDRS: "" } });
  });
  afterAll(async () => server?.close());

  it("refuses private, loopback and link-local targets, also behind a name, unless configured", async () => {
    for (const url of [
      "http://127.0.0.1:8080/hook",
      "http://localhost/hook",
      "http://[::1]/hook",
      "http://10.1.2.3/hook",
      "http://192.168.0.10/hook",
      "http://172.16.5.4/hook",
      "http://169.254.169.254/latest/meta-data",
      "http://[fe80::1]/hook",
      "http://[fd00::1]/hook",
      "http://[::ffff:127.0.0.1]/hook",
      "http://0.0.0.0/hook",
      "http://100.64.0.1/hook",
    ]) {
      const refused = await http(server, "POST", "/v1/webhooks", { body: { url } });
      expect({ url, status: refused.status, error: refused.body.errors?.[0] }).toMatchObject({
        url,
        status: 422,
        error: { pointer: "/url", code: "TARGET_NOT_ALLOWED" },
      });
    }
    const allowed = await http(server, "POST", "/v1/webhooks", { body: { url: "https://93.184.215.14/hook" } });
    expect(allowed.status).toBe(201);
  });

  it("refuses every IPv6 form that carries a loopback, private or link-local IPv4 address, for every kind", async () => {
    const hosts = [
      "[::127.0.0.1]", // IPv4-compatible, as the URL parser writes it: [::7f00:1]
      "[::7f00:1]",
      "[::ffff:127.0.0.1]", // IPv4-mapped
      "[::ffff:7f00:1]",
      "[::ffff:0:10.1.2.3]", // IPv4-translated
      "[64:ff9b::169.254.169.254]", // NAT64
      "[2002:c0a8:0001::1]", // 6to4 of 192.168.0.1
      "[::a9fe:a9fe]",
    ];
    for (const host of hosts) {
      for (const [body, pointer] of [
        [{ url: `http://${host}:8080/hook` }, "/url"],
        [{ destination: { kind: "rabbitmq", url: `amqp://${host}:5672`, exchange: "x" } }, "/destination/url"],
        [{ destination: { kind: "nats", url: `nats://${host}:4222`, subject: "a.b" } }, "/destination/url"],
      ] as const) {
        const refused = await http(server, "POST", "/v1/webhooks", { body });
        expect({ host, body, status: refused.status, error: refused.body.errors?.[0] }).toMatchObject({
          host,
          status: 422,
          error: { pointer, code: "TARGET_NOT_ALLOWED" },
        });
      }
    }
    // The same IPv6 forms of a public address stay allowed where they were.
    const mapped = await http(server, "POST", "/v1/webhooks", { body: { url: "https://[::ffff:93.184.215.14]/hook" } });
    expect(mapped.status).toBe(201);
  });
});
