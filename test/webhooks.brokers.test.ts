import { Ajv2020 } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { ChannelModel } from "amqplib";
import type { NatsConnection } from "@nats-io/transport-node";
import type { JetStreamManager } from "@nats-io/jetstream";
import { Webhook } from "standardwebhooks";
import {
  BROKER_TLS,
  closedPort,
  connectNats,
  connectRabbitMq,
  natsStream,
  NATS_URL,
  OwnNatsServer,
  RABBITMQ_URL,
  rabbitMqReceiver,
  uniqueName,
  type BrokerMessage,
} from "./support/brokers.ts";
import { gql, gqlData } from "./support/graphql-client.ts";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually, getDelivery, listDeliveries } from "./support/webhooks.ts";

/*
 * Broker destinations (SPEC §9.3) against the real brokers: one event reaches an HTTP endpoint, a RabbitMQ queue
 * bound to the endpoint's exchange and a JetStream stream with the same body and a signature that verifies; a
 * broker that is down, an exchange or a stream that is missing, gets retries and then every event, in order per
 * reference; reads mask the URL's password and bad destinations are refused with pointers.
 */

const ENV = {
  WEBHOOK_RETRY_SCHEDULE: `0s,${Array.from({ length: 40 }, () => "150ms").join(",")}`,
  WEBHOOK_TIMEOUT: "3s",
  WEBHOOK_LEASE: "10s",
  WEBHOOK_POLL_INTERVAL: "50ms",
  WEBHOOK_DISABLE_AFTER: "1h",
  // The test CA of the NATS server that requires TLS (the others are plain: a CA changes nothing for them).
  WEBHOOK_BROKER_CA_FILE: BROKER_TLS.caFile,
};

function verify(message: BrokerMessage, secret: string): void {
  // Throws unless the signature, the id and the timestamp agree (the independent standardwebhooks package).
  new Webhook(secret).verify(message.body, message.headers);
}

describe.each(DATABASE_KINDS)("broker destinations on %s", (kind) => {
  let server: TestServer;
  let receiver: WebhookReceiver;
  let rabbit: ChannelModel;
  let nats: { connection: NatsConnection; manager: JetStreamManager };

  beforeAll(async () => {
    rabbit = await connectRabbitMq();
    nats = await connectNats();
    receiver = await WebhookReceiver.start();
    server = await startTestServer(kind, { env: ENV });
  });

  afterAll(async () => {
    await server?.close();
    await receiver?.close();
    await rabbit?.close();
    await nats?.connection.close();
  });

  it("delivers one event to HTTP, RabbitMQ and JetStream with the same body and a verifiable signature", async () => {
    const queue = await rabbitMqReceiver(rabbit);
    const subject = uniqueName("reftrail.test").replaceAll("-", "_");
    const stream = await natsStream(nats.manager, subject);
    try {
      const tag = await http(server, "POST", "/v1/tags", { body: { name: uniqueName("brokers") } });
      expectStatus(tag, 201);
      const filters = { tag_ids: [tag.body.id], event_types: ["reference_created"] };
      const httpEndpoint = await createEndpoint(server, { url: receiver.url("/brokers-all"), ...filters });
      const rabbitEndpoint = await createEndpoint(server, {
        destination: { kind: "rabbitmq", url: RABBITMQ_URL, exchange: queue.exchange },
        ...filters,
      });
      const natsEndpoint = await createEndpoint(server, {
        destination: { kind: "nats", url: NATS_URL, subject: `${subject}.events` },
        ...filters,
      });
      receiver.verifyWith("/brokers-all", httpEndpoint.secret);
      await createReference(server, { tags: [{ id: tag.body.id }] });

      const [sent] = await receiver.waitForCount("/brokers-all", 1);
      await eventually(async () => queue.messages.length >= 1, 10_000, "the RabbitMQ message");
      const [published] = await eventually(async () => {
        const messages = await stream.read();
        return messages.length >= 1 && messages;
      });
      const [consumed] = queue.messages;
      expect(sent!.verifiedBy).toEqual([httpEndpoint.secret]);
      verify(consumed!, rabbitEndpoint.secret);
      verify(published!, natsEndpoint.secret);
      // The same bytes everywhere; each webhook-id is its endpoint's delivery id; JetStream deduplicates by it.
      expect(consumed!.body).toBe(sent!.body);
      expect(published!.body).toBe(sent!.body);
      // Each message's body validates against the event catalog's published schema of its type (strict ajv).
      const catalog = await http(server, "GET", "/v1/event-types");
      const entry = catalog.body.data.find((item: { type: string }) => item.type === "reference_created");
      const addFormatsPlugin = addFormats as unknown as (ajv: Ajv2020) => Ajv2020;
      const validate = addFormatsPlugin(new Ajv2020({ strict: true, allowUnionTypes: true })).compile(entry.schema);
      for (const message of [consumed!, published!]) expect(validate(JSON.parse(message.body))).toBe(true);
      expect(consumed!.headers["content-type"]).toBe("application/json");
      expect(published!.headers["content-type"]).toBe("application/json");
      const [rabbitDelivery] = await listDeliveries(server, rabbitEndpoint.id);
      const [natsDelivery] = await listDeliveries(server, natsEndpoint.id);
      expect(consumed!.headers["webhook-id"]).toBe(rabbitDelivery.id);
      expect(published!.headers["webhook-id"]).toBe(natsDelivery.id);
      expect(published!.headers["nats-msg-id"]).toBe(natsDelivery.id);
      // No queue or stream was made by reftrail; the routing key defaults to the event type, which the log shows.
      const log = await eventually(async () => {
        const delivery = await getDelivery(server, natsEndpoint.id, natsDelivery.id);
        return delivery.status === "succeeded" && delivery;
      });
      expect(log.attempts).toHaveLength(1);
      expect(log.attempts[0].status_code).toBe(202);
      expect(JSON.parse(log.attempts[0].response_body)).toMatchObject({ stream: stream.name, seq: 1 });

      // A replay sends the event again under the same webhook-id: RabbitMQ carries it twice, the stream keeps one
      // copy (Nats-Msg-Id) and says so in the attempt's response.
      const since = new Date(Date.now() - 60_000).toISOString();
      for (const endpoint of [rabbitEndpoint, natsEndpoint])
        expectStatus(await http(server, "POST", `/v1/webhooks/${endpoint.id}/replay`, { body: { since } }), 202);
      await eventually(async () => queue.messages.length >= 2, 10_000, "the replayed RabbitMQ message");
      expect(queue.messages[1]!.headers["webhook-id"]).toBe(rabbitDelivery.id);
      expect(queue.messages[1]!.body).toBe(sent!.body);
      const replayed = await eventually(async () => {
        const delivery = await getDelivery(server, natsEndpoint.id, natsDelivery.id);
        return delivery.attempts.length === 2 && delivery.status === "succeeded" && delivery;
      });
      expect(JSON.parse(replayed.attempts[1].response_body)).toMatchObject({ seq: 1, duplicate: true });
      expect(await stream.read()).toHaveLength(1);
    } finally {
      await queue.channel.close();
      await stream.delete();
    }
  });

  it("retries while the RabbitMQ broker is down and then delivers everything, in order per reference", async () => {
    const queue = await rabbitMqReceiver(rabbit);
    try {
      const down = RABBITMQ_URL.replace(/:5672\//, `:${await closedPort()}/`);
      expect(down).not.toBe(RABBITMQ_URL);
      const endpoint = await createEndpoint(server, {
        destination: { kind: "rabbitmq", url: down, exchange: queue.exchange, routing_key: "tracking" },
        ordering: "reference",
      });
      const reference = await writeStory(server, 3);
      // Every delivery of the reference waits behind the first, which keeps failing: the log says why.
      const failing = await eventually(async () => {
        const deliveries = await listDeliveries(server, endpoint.id);
        const first = deliveries.find((delivery) => delivery.attempt_count >= 2);
        return first && (await getDelivery(server, endpoint.id, first.id));
      });
      expect(failing.attempts[0].error).toMatch(/ECONNREFUSED/);
      expect(failing.attempts[0].error).not.toMatch(/guest:guest/);
      expect(queue.messages).toEqual([]);
      // The broker is back (the endpoint points at it again, its URL given in full).
      const fixed = await http(server, "PATCH", `/v1/webhooks/${endpoint.id}`, {
        body: {
          destination: { kind: "rabbitmq", url: RABBITMQ_URL, exchange: queue.exchange, routing_key: "tracking" },
        },
      });
      expectStatus(fixed, 200);
      await eventually(async () => queue.messages.length >= 3, 15_000, "three RabbitMQ messages");
      expect(queue.messages.map((message) => JSON.parse(message.body).id)).toEqual(reference.log);
      for (const message of queue.messages) verify(message, endpoint.secret);
      // The broker confirms a publish before the worker records its outcome: wait for the record, not the message.
      await eventually(
        async () => (await listDeliveries(server, endpoint.id)).every((delivery) => delivery.status === "succeeded"),
        15_000,
        "three deliveries recorded as succeeded",
      );
      const deliveries = await listDeliveries(server, endpoint.id);
      expect(deliveries.map((delivery) => delivery.status)).toEqual(["succeeded", "succeeded", "succeeded"]);
    } finally {
      await queue.channel.close();
    }
  });

  it("retries while the RabbitMQ exchange is missing, without failing another exchange's publishes", async () => {
    const queue = await rabbitMqReceiver(rabbit);
    const missing = uniqueName("reftrail-missing");
    try {
      const late = await createEndpoint(server, {
        destination: { kind: "rabbitmq", url: RABBITMQ_URL, exchange: missing },
      });
      const healthy = await createEndpoint(server, {
        destination: { kind: "rabbitmq", url: RABBITMQ_URL, exchange: queue.exchange },
      });
      await writeStory(server, 2);
      const failing = await eventually(async () => {
        const [delivery] = await listDeliveries(server, late.id);
        return delivery?.attempt_count >= 2 && (await getDelivery(server, late.id, delivery.id));
      });
      expect(failing.attempts[0].error).toMatch(/NOT_FOUND - no exchange/);
      // The other exchange on the same broker (the same pooled connection) is not disturbed.
      await eventually(async () => queue.messages.length >= 2, 10_000, "the healthy exchange's messages");
      const [healthyDelivery] = await listDeliveries(server, healthy.id);
      expect((await getDelivery(server, healthy.id, healthyDelivery.id)).attempts).toHaveLength(1);
      // The receiver declares its exchange: the retries reach it.
      await queue.channel.assertExchange(missing, "topic", { durable: false, autoDelete: true });
      await queue.channel.bindQueue((await queue.channel.assertQueue("", { exclusive: true })).queue, missing, "#");
      await eventually(async () => {
        const deliveries = await listDeliveries(server, late.id);
        return deliveries.length === 2 && deliveries.every((delivery) => delivery.status === "succeeded");
      }, 15_000);
    } finally {
      await queue.channel.deleteExchange(missing).catch(() => undefined);
      await queue.channel.close().catch(() => undefined);
    }
  });

  it("retries while no stream captures the NATS subject and then delivers everything, in order", async () => {
    const subject = uniqueName("reftrail.late").replaceAll("-", "_");
    const endpoint = await createEndpoint(server, {
      destination: { kind: "nats", url: NATS_URL, subject: `${subject}.events` },
      ordering: "reference",
    });
    const reference = await writeStory(server, 3);
    const failing = await eventually(async () => {
      const deliveries = await listDeliveries(server, endpoint.id);
      const first = deliveries.find((delivery) => delivery.attempt_count >= 2);
      return first && (await getDelivery(server, endpoint.id, first.id));
    });
    expect(failing.attempts[0].error).toMatch(/no stream captures the subject/);
    expect(failing.attempts[0].status_code).toBeNull();
    // The receiver creates its stream: the retries find it.
    const stream = await natsStream(nats.manager, subject);
    try {
      const messages = await eventually(async () => {
        const stored = await stream.read();
        return stored.length >= 3 && stored;
      }, 15_000);
      expect(messages.map((message) => JSON.parse(message.body).id)).toEqual(reference.log);
      for (const message of messages) verify(message, endpoint.secret);
      const log = await getDelivery(server, endpoint.id, failing.id);
      expect(log.attempts.length).toBeGreaterThanOrEqual(3);
      expect(log.attempts.at(-1).status_code).toBe(202);
    } finally {
      await stream.delete();
    }
  });

  it("retries while the NATS server is down and then delivers everything, in order, nothing lost", async () => {
    const own = await OwnNatsServer.start();
    const { connect } = await import("@nats-io/transport-node");
    const { jetstreamManager } = await import("@nats-io/jetstream");
    const subject = uniqueName("reftrail.down").replaceAll("-", "_");
    const streamOn = async () => {
      const connection = await connect({ servers: `127.0.0.1:${own.port}` });
      return { connection, stream: await natsStream(await jetstreamManager(connection), subject) };
    };
    let admin = await streamOn();
    try {
      const endpoint = await createEndpoint(server, {
        destination: { kind: "nats", url: own.url, subject: `${subject}.events` },
        ordering: "reference",
      });
      const reference = await writeStory(server, 1);
      await eventually(async () => (await admin.stream.read()).length === 1, 10_000, "the first message");
      // The broker goes down: the pooled connection is lost, the next events' attempts fail.
      await admin.connection.close();
      await own.stop();
      const more = await writeEvents(server, reference.id, 3);
      const failing = await eventually(async () => {
        const deliveries = await listDeliveries(server, endpoint.id);
        const waiting = deliveries.find((delivery) => delivery.attempt_count >= 2 && delivery.status === "pending");
        return waiting && (await getDelivery(server, endpoint.id, waiting.id));
      });
      expect(failing.attempts[0].status_code).toBeNull();
      expect(failing.attempts[0].error).toMatch(/^nats nats:\/\/127\.0\.0\.1:\d+ subject/);
      // It comes back with its stream (same store): every event arrives, in the log's order, each once.
      await own.resume();
      admin = { connection: await connect({ servers: `127.0.0.1:${own.port}` }), stream: admin.stream };
      const manager = await jetstreamManager(admin.connection);
      const messages = await eventually(async () => {
        const info = await manager.streams.info(admin.stream.name);
        return info.state.messages >= 4 && info.state.messages;
      }, 20_000);
      expect(messages).toBe(4);
      const stored: string[] = [];
      for (let seq = 1; seq <= 4; seq++) {
        const message = await manager.streams.getMessage(admin.stream.name, { seq });
        stored.push(JSON.parse(new TextDecoder().decode(message!.data)).id);
      }
      expect(stored).toEqual([...reference.log, ...more]);
      // The last outcome is recorded just after the stream stored it.
      await eventually(async () => {
        const deliveries = await listDeliveries(server, endpoint.id);
        return deliveries.length === 4 && deliveries.every((delivery) => delivery.status === "succeeded");
      });
    } finally {
      await admin.connection.close().catch(() => undefined);
      await own.close();
    }
  });

  it("delivers over TLS to a tls:// NATS URL, the certificate checked against the URL's host name", async () => {
    const own = await OwnNatsServer.start({ tls: true });
    const admin = await own.connect();
    const subject = uniqueName("reftrail.tls").replaceAll("-", "_");
    const stream = await natsStream(admin.manager, subject);
    try {
      // Its certificate names `localhost` and is signed by the test CA, which WEBHOOK_BROKER_CA_FILE adds.
      const endpoint = await createEndpoint(server, {
        destination: { kind: "nats", url: `tls://localhost:${own.port}`, subject: `${subject}.events` },
        ordering: "reference",
      });
      // The same server by its address, which the certificate does not name: refused by the check.
      const byAddress = await createEndpoint(server, {
        destination: { kind: "nats", url: `tls://127.0.0.1:${own.port}`, subject: `${subject}.address` },
      });
      // The TLS server under nats://: the client's own upgrade fails its check, and the error says what to do.
      const asPlain = await createEndpoint(server, {
        destination: { kind: "nats", url: `nats://localhost:${own.port}`, subject: `${subject}.plain_scheme` },
      });
      // A server without TLS under tls://: the attempt fails rather than sending in clear.
      const plain = await createEndpoint(server, {
        destination: { kind: "nats", url: NATS_URL.replace(/^nats:/, "tls:"), subject: `${subject}.plain` },
      });
      const reference = await writeStory(server, 2);
      const messages = await eventually(async () => {
        const stored = await stream.read();
        return stored.length === 2 && stored;
      }, 15_000);
      expect(messages.map((message) => JSON.parse(message.body).id)).toEqual(reference.log);
      for (const message of messages) verify(message, endpoint.secret);
      const firstError = async (endpointId: string) =>
        eventually(async () => {
          const [delivery] = await listDeliveries(server, endpointId);
          if (!delivery || delivery.attempt_count === 0) return false;
          return (await getDelivery(server, endpointId, delivery.id)).attempts[0].error as string;
        });
      expect(await firstError(byAddress.id)).toMatch(/altnames|certificate/i);
      expect(await firstError(plain.id)).toMatch(/does not support 'tls'/);
      expect(await firstError(asPlain.id)).toMatch(/give it as tls:\/\//);
      expect((await stream.read()).length).toBe(2);
    } finally {
      await stream.delete();
      await admin.connection.close();
      await own.close();
    }
  });

  it("masks the broker URL's password on every read and stores it encrypted", async () => {
    const created = await createEndpoint(server, {
      destination: { kind: "rabbitmq", url: "amqp://reader:s3cret-pw@127.0.0.1:5672/vh", exchange: "orders" },
    });
    const masked = {
      kind: "rabbitmq",
      url: "amqp://reader:****@127.0.0.1:5672/vh",
      exchange: "orders",
      routing_key: null,
    };
    expect(created.destination).toEqual(masked);
    expect(created.url).toBeNull();
    const read = await http(server, "GET", `/v1/webhooks/${created.id}`);
    expect(read.body.destination).toEqual(masked);
    const graphql = await gqlData(
      server,
      `query ($id: ID!) { webhookEndpoint(id: $id) { url destination { __typename ... on RabbitMqDestination { url exchange routingKey } } } }`,
      { id: created.id },
    );
    expect(graphql.webhookEndpoint).toEqual({
      url: null,
      destination: { __typename: "RabbitMqDestination", url: masked.url, exchange: "orders", routingKey: null },
    });
    const [row] = await server.database.prisma.$queryRaw<{ url: string; destination: string }[]>`
      SELECT "url", "destination" FROM "webhook_endpoints" WHERE "id" = ${created.id}`;
    expect(JSON.stringify(row)).not.toContain("s3cret-pw");
    // A change of exchange alone keeps the stored URL (it is never shown back, so it cannot be sent again).
    const changed = await http(server, "PATCH", `/v1/webhooks/${created.id}`, {
      body: { destination: { kind: "rabbitmq", exchange: "invoices" } },
    });
    expectStatus(changed, 200);
    expect(changed.body.destination).toEqual({ ...masked, exchange: "invoices" });
    const nats = await createEndpoint(server, {
      destination: { kind: "nats", url: "nats://a-token@127.0.0.1:4222", subject: "tracking.events" },
    });
    expect(nats.destination).toEqual({ kind: "nats", url: "nats://****@127.0.0.1:4222", subject: "tracking.events" });
    const natsOverTls = await createEndpoint(server, {
      destination: { kind: "nats", url: "tls://a-token@localhost:4222", subject: "tracking.tls" },
    });
    expect(natsOverTls.destination).toEqual({
      kind: "nats",
      url: "tls://****@localhost:4222",
      subject: "tracking.tls",
    });
    const viaGraphql = await gqlData(
      server,
      `mutation ($input: CreateWebhookEndpointInput!) {
        createWebhookEndpoint(input: $input) {
          webhookEndpoint { url destination { __typename ... on NatsDestination { url subject } } }
        }
      }`,
      { input: { destination: { nats: { url: "nats://user:pw-secret@127.0.0.1:4222", subject: "tracking.gql" } } } },
    );
    expect(viaGraphql.createWebhookEndpoint.webhookEndpoint).toEqual({
      url: null,
      destination: { __typename: "NatsDestination", url: "nats://user:****@127.0.0.1:4222", subject: "tracking.gql" },
    });
    // Back to HTTP: the destination goes.
    const toHttp = await http(server, "PATCH", `/v1/webhooks/${nats.id}`, { body: { url: receiver.url("/back") } });
    expectStatus(toHttp, 200);
    expect(toHttp.body).toMatchObject({ url: receiver.url("/back"), destination: null });
  });

  it("refuses bad destinations with a pointer to the field", async () => {
    const refused = async (body: Record<string, unknown>, pointer: string, code: string) => {
      const result = await http(server, "POST", "/v1/webhooks", { body });
      expect({ status: result.status, errors: result.body.errors }).toMatchObject({
        status: 422,
        errors: [{ pointer, code }],
      });
    };
    const rabbitmq = { kind: "rabbitmq", url: RABBITMQ_URL, exchange: "orders" };
    await refused({ url: receiver.url("/x"), destination: rabbitmq }, "/destination", "CONFLICTING_FIELDS");
    await refused({ destination: { kind: "rabbitmq", url: RABBITMQ_URL } }, "/destination/exchange", "REQUIRED");
    await refused({ destination: { ...rabbitmq, url: "nats://127.0.0.1:4222" } }, "/destination/url", "INVALID_SCHEME");
    await refused(
      { destination: { ...rabbitmq, url: "amqp://10.1.2.3:5672" } },
      "/destination/url",
      "TARGET_NOT_ALLOWED",
    );
    await refused(
      { destination: { ...rabbitmq, routing_key: "x".repeat(256) } },
      "/destination/routing_key",
      "INVALID_LENGTH",
    );
    await refused(
      { destination: { kind: "nats", url: NATS_URL, subject: "a.*" } },
      "/destination/subject",
      "INVALID_SUBJECT",
    );
    await refused(
      { destination: { kind: "nats", url: NATS_URL, subject: "a", exchange: "x" } },
      "/destination/exchange",
      "UNKNOWN_FIELD",
    );
    await refused({ destination: { kind: "kafka", url: "kafka://x" } }, "/destination/kind", "ENUM");
    await refused(
      { destination: { ...rabbitmq, url: "amqp://u:%zz@127.0.0.1:5672" } },
      "/destination/url",
      "INVALID_URL",
    );
    await refused({ description: "nowhere" }, "/url", "REQUIRED");

    const graphql = await gql(
      server,
      `mutation ($input: CreateWebhookEndpointInput!) { createWebhookEndpoint(input: $input) { secret } }`,
      { input: { destination: { rabbitmq: { url: "amqp://192.168.1.1", exchange: "orders" } } } },
    );
    expect(graphql.body.errors?.[0]?.extensions).toMatchObject({
      code: "VALIDATION_FAILED",
      field: "input.destination.rabbitmq.url",
    });
  });
});

/** Writes `count` more events on the reference (extraction outcomes); their ids, oldest first. */
async function writeEvents(server: TestServer, referenceId: string, count: number): Promise<string[]> {
  for (let index = 0; index < count; index++) {
    const body = { status: "failed", error: { code: "TIMEOUT", message: `down ${index}` } };
    expectStatus(await http(server, "POST", `/v1/references/${referenceId}/extractions`, { body }), 201);
  }
  const page = await http(server, "GET", `/v1/references/${referenceId}/events?limit=500`);
  expectStatus(page, 200);
  return page.body.data.map((event: { id: string }) => event.id).slice(-count);
}

/** A reference with `count` events (its creation, then extraction outcomes), and its log, oldest first. */
async function writeStory(server: TestServer, count: number): Promise<{ id: string; log: string[] }> {
  const reference = await createReference(server);
  for (let index = 1; index < count; index++) {
    const body =
      index % 2 === 0 ? { status: "succeeded" } : { status: "failed", error: { code: "TIMEOUT", message: "x" } };
    expectStatus(await http(server, "POST", `/v1/references/${reference.id}/extractions`, { body }), 201);
  }
  const page = await http(server, "GET", `/v1/references/${reference.id}/events?limit=500`);
  expectStatus(page, 200);
  return { id: reference.id, log: page.body.data.map((event: { id: string }) => event.id) };
}
