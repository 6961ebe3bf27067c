import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { context, SpanKind, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from "@opentelemetry/sdk-trace-base";
import { loadConfig } from "../src/config.ts";
import { gql, gqlData } from "./support/graphql-client.ts";
import { subscribeOverSse } from "./support/sse-client.ts";
import { subscribe } from "./support/subscription-client.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually } from "./support/webhooks.ts";

/*
 * OpenTelemetry traces (src/tracing/), read through an in-memory exporter from a real server on each database:
 * one GraphQL request is one trace, request -> operation -> its statements, in the trace its `traceparent` named;
 * a webhook delivery attempt is a span whose `traceparent` the receiver gets; a subscription message is a span,
 * over graphql-ws and SSE. With tracing off, no span is made at all, not even through the global API.
 */

const REFERENCE_QUERY = `query TracedReference($id: ID!) {
  reference(id: $id) {
    id
    tags { id name }
    events(first: 20) { edges { node { id type } } }
  }
}`;

const EVENTS = `subscription TracedEvents { lifecycleEvents { cursor node { id type } } }`;

const TRACE_ID = "0af7651916cd43dd8448eb211c80319c";
const CALLER_SPAN_ID = "b7ad6b7169203331";

const ENV = { SUBSCRIPTION_POLL_INTERVAL: "100ms", WEBHOOK_POLL_INTERVAL: "50ms", READS_PER_TURN: "1" };

function byParent(spans: readonly ReadableSpan[], parent: ReadableSpan): ReadableSpan[] {
  return spans.filter((span) => span.parentSpanContext?.spanId === parent.spanContext().spanId);
}

/** The spans below `root` in its trace, at any depth. */
function descendants(spans: readonly ReadableSpan[], root: ReadableSpan): ReadableSpan[] {
  const found: ReadableSpan[] = [];
  for (const child of byParent(spans, root)) found.push(child, ...descendants(spans, child));
  return found;
}

const isStatement = (span: ReadableSpan) => span.attributes["db.query.text"] !== undefined;

describe.each(DATABASE_KINDS)("traces on %s", (kind) => {
  const exporter = new InMemorySpanExporter();
  let server: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    server = await startTestServer(kind, { env: ENV, spans: { exporter } });
    receiver = await WebhookReceiver.start();
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });
  afterEach(() => exporter.reset());

  it("makes one trace of a GraphQL request, through Apollo and without it: request -> operation -> its SQL statements, under the caller's traceparent", async () => {
    const reference = await createReference(server);
    // A document's first request runs through Apollo, the next ones without it (src/graphql/direct-queries.ts).
    for (let round = 0; round < 2; round++) {
      exporter.reset();
      const response = await gql(
        server,
        REFERENCE_QUERY,
        { id: reference.id },
        {
          headers: { "cache-control": "no-cache", traceparent: `00-${TRACE_ID}-${CALLER_SPAN_ID}-01` },
        },
      );
      expect(response.status).toBe(200);
      expect(response.body.data.reference.id).toBe(reference.id);

      const request = await eventually(
        async () => exporter.getFinishedSpans().find((span) => span.kind === SpanKind.SERVER),
        10_000,
        "the request's span",
      );
      // The request's trace (the webhook worker's polls, say, are traces of their own).
      const spans = exporter.getFinishedSpans().filter((span) => span.spanContext().traceId === TRACE_ID);
      expect(request.parentSpanContext?.spanId).toBe(CALLER_SPAN_ID);
      expect(request.name).toBe("POST /graphql");
      expect(request.attributes).toMatchObject({
        "http.request.method": "POST",
        "url.path": "/graphql",
        "http.route": "/graphql",
        "http.response.status_code": 200,
      });

      const operations = byParent(spans, request).filter((span) => span.attributes["graphql.operation.type"]);
      expect(operations).toHaveLength(1);
      const operation = operations[0]!;
      expect(operation.name).toBe("query TracedReference");
      expect(operation.attributes).toMatchObject({
        "graphql.operation.name": "TracedReference",
        "graphql.operation.type": "query",
      });
      expect(operation.attributes["reftrail.graphql.estimated_cost"]).toEqual(expect.any(Number));
      expect(operation.attributes["reftrail.graphql.estimated_cost"]).toBeGreaterThan(0);

      const statements = descendants(spans, operation).filter(isStatement);
      expect(statements.length).toBeGreaterThan(0);
      for (const statement of statements) {
        expect(statement.kind).toBe(SpanKind.CLIENT);
        expect(statement.attributes["db.system.name"]).toBe(kind === "postgres" ? "postgresql" : "sqlite");
        expect(statement.name).toMatch(/^SELECT [a-z_]+$/);
        // A template: the value the request looked up is a bound parameter, never in the span.
        expect(JSON.stringify(statement.attributes)).not.toContain(reference.id);
      }
      // Everything else of the trace hangs under the request. (The API key's lookup, shared by the requests of a
      // turn, is a trace of its own.)
      expect(descendants(spans, request)).toHaveLength(spans.length - 1);
    }
  });

  it("puts the statements of a loader's batch under the operation that loaded it", async () => {
    const references = await Promise.all([createReference(server), createReference(server)]);
    exporter.reset();
    const response = await gql(
      server,
      `query TracedNodes($ids: [ID!]!) { nodes(ids: $ids) { id ... on Reference { tags { name } } } }`,
      { ids: references.map((reference) => reference.id) },
      { headers: { "cache-control": "no-cache", traceparent: `00-${TRACE_ID}-${CALLER_SPAN_ID}-01` } },
    );
    expect(response.status).toBe(200);
    expect(response.body.data.nodes.map((node: { id: string }) => node.id)).toEqual(references.map((r) => r.id));
    const request = await eventually(
      async () => exporter.getFinishedSpans().find((span) => span.kind === SpanKind.SERVER),
      10_000,
      "the request's span",
    );
    const spans = exporter.getFinishedSpans();
    const [operation] = byParent(spans, request).filter((span) => span.name === "query TracedNodes");
    // The batch runs on a later tick than the loads (DataLoader's schedule), in the context of the first load.
    const statements = descendants(spans, operation!).filter(isStatement);
    expect(statements.map((span) => span.name)).toContain("SELECT shipping_references");
    expect(statements.every((span) => span.spanContext().traceId === TRACE_ID)).toBe(true);
  });

  it("puts a mutation's unit of work and its writes under the operation", async () => {
    const response = await gql(
      server,
      `mutation TracedCreate($input: CreateReferenceInput!) { createReference(input: $input) { reference { id } } }`,
      { input: { billOfLading: `BL-TRACED-${kind}-${Date.now()}`, carrierCode: "MAEU" } },
      { headers: { traceparent: `00-${TRACE_ID}-${CALLER_SPAN_ID}-01` } },
    );
    expect(response.status).toBe(200);
    expect(response.body.errors).toBeUndefined();
    const operation = await eventually(
      async () => exporter.getFinishedSpans().find((span) => span.name === "mutation TracedCreate"),
      10_000,
      "the operation's span",
    );
    const spans = exporter.getFinishedSpans();
    // The unit of work waits for a connection (PostgreSQL) or the writer's turn (SQLite) before its statements.
    const [unit] = descendants(spans, operation).filter((span) => span.name === "transaction");
    expect(unit).toBeDefined();
    expect(descendants(spans, unit!).map((span) => span.name)).toEqual(
      expect.arrayContaining(["INSERT shipping_references", "INSERT lifecycle_events"]),
    );
  });

  it("puts each REST read's statements under its own request, also when the read admission held it", async () => {
    const references = await Promise.all(Array.from({ length: 4 }, () => createReference(server)));
    exporter.reset();
    // READS_PER_TURN=1: of reads arriving together, all but one wait for a later turn of the admission.
    const reads = Array.from({ length: 24 }, (_, i) => references[i % references.length]!.id);
    const statuses = await Promise.all(
      reads.map(async (id) => {
        const response = await fetch(`${server.url}/v1/references/${id}`, {
          headers: { "x-api-key": server.apiKey, "cache-control": "no-cache" },
        });
        await response.arrayBuffer();
        return response.status;
      }),
    );
    expect(statuses.every((status) => status === 200)).toBe(true);
    const requests = await eventually(
      async () => {
        const found = exporter.getFinishedSpans().filter((span) => span.name === "GET /v1/references/:referenceId");
        return found.length === reads.length && found;
      },
      10_000,
      "every request's span",
    );
    const spans = exporter.getFinishedSpans();
    for (const request of requests) {
      expect(request.attributes).toMatchObject({ "http.route": "/v1/references/:referenceId" });
      const own = descendants(spans, request).filter(isStatement);
      expect(own.map((span) => span.name)).toContain("SELECT shipping_references");
      expect(own.every((span) => span.spanContext().traceId === request.spanContext().traceId)).toBe(true);
    }
  });

  it("makes a span per webhook delivery attempt, and sends its traceparent", async () => {
    const path = `/traced-${kind}`;
    const endpoint = await createEndpoint(server, { url: receiver.url(path), event_types: ["reference_created"] });
    receiver.verifyWith(path, endpoint.secret);
    exporter.reset();
    await createReference(server);
    const [received] = await receiver.waitForCount(path, 1);
    const attempt = await eventually(
      async () => exporter.getFinishedSpans().find((span) => span.name === "webhook delivery"),
      10_000,
      "the delivery's span",
    );
    expect(attempt.kind).toBe(SpanKind.CLIENT);
    expect(attempt.parentSpanContext).toBeUndefined();
    expect(attempt.attributes).toMatchObject({
      "reftrail.webhook.endpoint_id": endpoint.id,
      "reftrail.webhook.delivery_id": received!.webhookId,
      "reftrail.webhook.attempt": 1,
      "http.response.status_code": 200,
    });
    const { traceId, spanId } = attempt.spanContext();
    expect(received!.headers.traceparent).toBe(`00-${traceId}-${spanId}-01`);
    // The signature still verifies: the header is outside what Standard Webhooks signs.
    expect(received!.verifiedBy).toEqual([endpoint.secret]);
  });

  it("makes a span per subscription message, over graphql-ws and over SSE", async () => {
    const overWs = subscribe(server, EVENTS);
    const overSse = subscribeOverSse(server, EVENTS);
    try {
      // Each transport's subscription is open once a write reaches it.
      await eventually(
        async () => {
          await createReference(server);
          return overWs.data.length > 0 && overSse.data.length > 0;
        },
        20_000,
        "both subscriptions to receive an event",
      );
      const messages = exporter.getFinishedSpans().filter((span) => span.name === "subscription message");
      const transports = messages.map((span) => span.attributes["reftrail.subscription.transport"]);
      expect(transports).toContain("graphql-ws");
      expect(transports).toContain("sse");
      const ws = messages.find((span) => span.attributes["reftrail.subscription.transport"] === "graphql-ws")!;
      expect(ws.kind).toBe(SpanKind.PRODUCER);
      expect(ws.attributes["graphql.operation.name"]).toBe("TracedEvents");
      const sse = messages.find((span) => span.attributes["reftrail.subscription.transport"] === "sse")!;
      expect(sse.kind).toBe(SpanKind.PRODUCER);
      expect(sse.attributes["graphql.operation.name"]).toBe("TracedEvents");
      expect(messages.every((span) => span.parentSpanContext === undefined)).toBe(true);
    } finally {
      await overWs.dispose();
      overSse.dispose();
    }
  });
});

describe("traces off", () => {
  const exporter = new InMemorySpanExporter();
  let server: TestServer;
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

  /** The span active while each request was handled (none, with tracing off). */
  const activeSpans: unknown[] = [];

  beforeAll(async () => {
    // Whatever would trace through the process's global API lands here, and a span active anywhere in a
    // request would be seen by the hook below: nothing should.
    trace.setGlobalTracerProvider(provider);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    server = await startTestServer("sqlite", {
      env: ENV,
      beforeListen: (app) =>
        app.http.addHook("preHandler", async () => {
          activeSpans.push(trace.getActiveSpan());
        }),
    });
  });
  afterAll(async () => {
    await server?.close();
    trace.disable();
  });

  it("is the default: no OTEL_* setting, no tracing", () => {
    expect(loadConfig({}).tracing).toBeNull();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" }).tracing).toEqual({
      exporter: "otlp",
      serviceName: "reftrail",
    });
    expect(loadConfig({ OTEL_TRACES_EXPORTER: "console", OTEL_SERVICE_NAME: "edge" }).tracing).toEqual({
      exporter: "console",
      serviceName: "edge",
    });
    expect(
      loadConfig({ OTEL_TRACES_EXPORTER: "none", OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" }).tracing,
    ).toBeNull();
    expect(loadConfig({ OTEL_SDK_DISABLED: "true", OTEL_TRACES_EXPORTER: "otlp" }).tracing).toBeNull();
    expect(() => loadConfig({ OTEL_TRACES_EXPORTER: "zipkin" })).toThrow(/OTEL_TRACES_EXPORTER/);
  });

  it("makes no span for a GraphQL request, its statements or its writes", async () => {
    const reference = await createReference(server);
    const data = await gqlData(
      server,
      REFERENCE_QUERY,
      { id: reference.id },
      { headers: { "cache-control": "no-cache" } },
    );
    expect(data.reference.id).toBe(reference.id);
    expect(exporter.getFinishedSpans()).toEqual([]);
    expect(activeSpans.length).toBeGreaterThanOrEqual(2);
    expect(activeSpans.every((span) => span === undefined)).toBe(true);
  });
});
