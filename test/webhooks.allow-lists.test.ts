import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { NatsConnection } from "@nats-io/transport-node";
import type { JetStreamManager } from "@nats-io/jetstream";
import { connectNats, uniqueName } from "./support/brokers.ts";
import { http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { createEndpoint, createReference, eventually, getDelivery, listDeliveries } from "./support/webhooks.ts";

/*
 * Destinations are guarded per kind (issue 48, item 4): brokers have their own allow-list
 * (WEBHOOK_BROKER_ALLOWED_CIDRS), entries may name a port, and allowing a broker opens neither its range to HTTP
 * webhooks nor the broker's other ports. A NATS token given as the URL's user name is never shown back, nor in an
 * attempt's error.
 */

const ENV = {
  WEBHOOK_ALLOWED_CIDRS: "",
  WEBHOOK_BROKER_ALLOWED_CIDRS: "127.0.0.1:5672,127.0.0.1:4222",
  WEBHOOK_RETRY_SCHEDULE: `0s,${Array.from({ length: 20 }, () => "200ms").join(",")}`,
  WEBHOOK_TIMEOUT: "2s",
  WEBHOOK_POLL_INTERVAL: "50ms",
  WEBHOOK_DISABLE_AFTER: "1h",
};

describe.each(DATABASE_KINDS)("allow-lists per destination kind on %s", (kind) => {
  let server: TestServer;
  let nats: { connection: NatsConnection; manager: JetStreamManager };

  beforeAll(async () => {
    nats = await connectNats();
    server = await startTestServer(kind, { env: ENV });
  }, 60_000);
  afterAll(async () => {
    await server?.close();
    await nats?.connection.close();
  });

  const refused = async (body: Record<string, unknown>, pointer: string) => {
    const answer = await http(server, "POST", "/v1/webhooks", { body });
    expect({ body, status: answer.status, error: answer.body.errors?.[0] }).toMatchObject({
      body,
      status: 422,
      error: { pointer, code: "TARGET_NOT_ALLOWED" },
    });
  };

  it("allows the brokers' addresses and ports to brokers only", async () => {
    // The broker list opens nothing to HTTP, not even the brokers' own address and port.
    await refused({ url: "http://127.0.0.1:5672/hook" }, "/url");
    await refused({ url: "http://127.0.0.1:4222/hook" }, "/url");
    // A broker's other ports stay closed; other private addresses too.
    await refused(
      { destination: { kind: "rabbitmq", url: "amqp://127.0.0.1:15672", exchange: "x" } },
      "/destination/url",
    );
    await refused({ destination: { kind: "nats", url: "nats://127.0.0.1:8222", subject: "a.b" } }, "/destination/url");
    await refused({ destination: { kind: "nats", url: "nats://[::1]:4222", subject: "a.b" } }, "/destination/url");
    await refused(
      { destination: { kind: "rabbitmq", url: "amqp://10.0.0.1:5672", exchange: "x" } },
      "/destination/url",
    );
    // The ports allowed, written or implied by the scheme.
    await createEndpoint(server, { destination: { kind: "rabbitmq", url: "amqp://127.0.0.1", exchange: "x" } });
    await createEndpoint(server, { destination: { kind: "nats", url: "nats://127.0.0.1:4222", subject: "a.b" } });
  });

  it("never shows a NATS token given as the URL's user name, in reads or in an attempt's error", async () => {
    const token = `tok-${uniqueName("secret")}`;
    // No stream captures this subject: every attempt fails, with the broker's answer as its error.
    const subject = uniqueName("reftrail.nostream").replaceAll("-", "_");
    const endpoint = await createEndpoint(server, {
      destination: { kind: "nats", url: `nats://${token}@127.0.0.1:4222`, subject },
    });
    expect(JSON.stringify(endpoint)).not.toContain(token);
    await createReference(server);
    const failed = await eventually(async () => {
      const [delivery] = await listDeliveries(server, endpoint.id);
      return delivery && delivery.attempt_count >= 2 ? getDelivery(server, endpoint.id, delivery.id) : null;
    }, 20_000);
    expect(failed.attempts[0].error).toEqual(expect.any(String));
    const reads = [
      failed,
      await listDeliveries(server, endpoint.id),
      (await http(server, "GET", `/v1/webhooks/${endpoint.id}`)).body,
      (await http(server, "GET", "/v1/webhooks?limit=100")).body,
    ];
    for (const read of reads) expect(JSON.stringify(read)).not.toContain(token);
  });
});
