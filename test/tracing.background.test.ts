import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { context, createContextKey, ROOT_CONTEXT, SpanKind } from "@opentelemetry/api";
import { hrTimeToNanoseconds } from "@opentelemetry/core";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { expectStatus, http } from "./support/http.ts";
import { subscribe } from "./support/subscription-client.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";
import { WebhookReceiver } from "./support/webhook-receiver.ts";
import { createEndpoint, createReference, eventually, getDelivery } from "./support/webhooks.ts";

/*
 * Traces and the background (src/domain/shared/background-work.ts, src/store/sql/traced-executor.ts), read through
 * an in-memory exporter from a real server on each database: work a request only sets off (the webhook worker
 * its commit wakes, the live feed its commit signals) is no part of the request's trace, and an idle server, whose
 * worker polls and finds nothing, exports no trace at all.
 */

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN_ID = "00f067aa0ba902b7";
const POLL_INTERVAL_MS = 50;
const ENV = { WEBHOOK_POLL_INTERVAL: `${POLL_INTERVAL_MS}ms`, SUBSCRIPTION_POLL_INTERVAL: "100ms" };

/** The worker's claim statement (src/store/sql/webhook-claim-repository.ts), on either database. */
const isClaim = (sql: string) => sql.includes("candidates AS") && sql.includes('"lease_owner" =');

const EVENTS = `subscription BackgroundEvents { lifecycleEvents { node { id type } } }`;

function descendants(spans: readonly ReadableSpan[], root: ReadableSpan): ReadableSpan[] {
  const children = spans.filter((span) => span.parentSpanContext?.spanId === root.spanContext().spanId);
  return children.flatMap((child) => [child, ...descendants(spans, child)]);
}

const textOf = (span: ReadableSpan) => String(span.attributes["db.query.text"] ?? "");
const startOf = (span: ReadableSpan) => hrTimeToNanoseconds(span.startTime);
const endOf = (span: ReadableSpan) => hrTimeToNanoseconds(span.endTime);

// First in this file: the servers below turn traces on, which installs the process's context manager for good.
describe("traces off", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer("sqlite", { env: ENV });
  });
  afterAll(async () => {
    await server?.close();
  });

  it("installs no context manager: a context made active is not even carried through a call", async () => {
    const reference = await createReference(server);
    expectStatus(
      await http(server, "POST", `/v1/references/${reference.id}/updates`, {
        body: { estimated_arrival: "2027-01-10T08:00:00Z" },
        headers: { traceparent: `00-${TRACE_ID}-${CALLER_SPAN_ID}-01` },
      }),
      201,
    );
    const key = createContextKey("probe");
    // With no manager installed the API's is the no-op one, which activates nothing.
    expect(context.with(ROOT_CONTEXT.setValue(key, 1), () => context.active().getValue(key))).toBeUndefined();
  });
});

describe.each(DATABASE_KINDS)("traces and background work on %s", (kind) => {
  const exporter = new InMemorySpanExporter();
  let claims = 0;
  let server: TestServer;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    server = await startTestServer(kind, {
      env: ENV,
      spans: { exporter },
      onQuery: (sql) => {
        if (isClaim(sql)) claims += 1;
      },
    });
    receiver = await WebhookReceiver.start();
  });
  afterAll(async () => {
    await server?.close();
    await receiver?.close();
  });

  it("exports no trace while idle: the worker's polls that claim nothing make no span", async () => {
    exporter.reset();
    const from = claims;
    // Counted by the statements the database was sent, not by the clock.
    await eventually(async () => claims >= from + 10, 20_000, "ten polls of the webhook worker");
    expect(exporter.getFinishedSpans().map((span) => span.name)).toEqual([]);
  });

  it("keeps a POST …/updates trace to the request's own spans: the worker and the live feed it wakes are traces of their own", async () => {
    const path = `/updates-${kind}`;
    const endpoint = await createEndpoint(server, {
      url: receiver.url(path),
      event_types: ["reference_update_created"],
    });
    receiver.verifyWith(path, endpoint.secret);
    const reference = await createReference(server);
    // A live subscription, so that the update's commit also makes the live feed read the log.
    const live = subscribe(server, EVENTS);
    try {
      await eventually(
        async () => {
          await createReference(server);
          return live.data.length > 0;
        },
        20_000,
        "the subscription to receive an event",
      );
      exporter.reset();

      const update = await http(server, "POST", `/v1/references/${reference.id}/updates`, {
        body: { estimated_arrival: "2027-01-10T08:00:00Z" },
        headers: { traceparent: `00-${TRACE_ID}-${CALLER_SPAN_ID}-01` },
      });
      expectStatus(update, 201);
      // What the commit set off has run: the delivery was sent and its outcome recorded, the live feed read it.
      const [received] = await receiver.waitForCount(path, 1);
      await eventually(
        async () => (await getDelivery(server, endpoint.id, received!.webhookId)).status === "succeeded",
        20_000,
        "the delivery's outcome",
      );
      await eventually(
        async () =>
          live.data.some((data) => data.lifecycleEvents.node.type === "REFERENCE_UPDATE_CREATED") ? true : undefined,
        20_000,
        "the update's event on the subscription",
      );

      const request = await eventually(
        async () =>
          exporter
            .getFinishedSpans()
            .find((span) => span.kind === SpanKind.SERVER && span.spanContext().traceId === TRACE_ID),
        10_000,
        "the request's span",
      );
      expect(request.name).toBe("POST /v1/references/:referenceId/updates");
      const spans = exporter.getFinishedSpans();
      const trace = spans.filter((span) => span.spanContext().traceId === TRACE_ID);
      // The request's own work is there: its unit of work and the update's insert.
      expect(descendants(trace, request).map((span) => span.name)).toEqual(
        expect.arrayContaining(["transaction", "INSERT lifecycle_events"]),
      );
      // Everything of the trace hangs under the request: its one unit of work, nothing of the worker's (the claim,
      // the attempts' log), and nothing that started after the request ended. (The SDK stamps a span's start with
      // Date.now(), whole milliseconds, and its end from the monotonic clock: starts are compared to the
      // millisecond after the request's end.)
      expect(descendants(trace, request)).toHaveLength(trace.length - 1);
      expect(trace.filter((span) => span.name === "transaction")).toHaveLength(1);
      expect(trace.filter((span) => isClaim(textOf(span)) || textOf(span).includes("webhook_attempts"))).toEqual([]);
      for (const span of trace) expect(startOf(span)).toBeLessThan(endOf(request) + 1_000_000);
      // The worker's claim of the delivery and its attempt are traces of their own.
      const claim = spans.find((span) => isClaim(textOf(span)));
      expect(claim).toBeDefined();
      expect(claim!.parentSpanContext).toBeUndefined();
      expect(claim!.spanContext().traceId).not.toBe(TRACE_ID);
      const attempt = spans.find((span) => span.name === "webhook delivery");
      expect(attempt).toBeDefined();
      expect(attempt!.spanContext().traceId).not.toBe(TRACE_ID);
      // The worker's work after the check that began its requests (on PostgreSQL a transaction, ended long before)
      // is no part of that check either: no unit of work sits inside another, and every claim is a root.
      const byId = new Map(spans.map((span) => [span.spanContext().spanId, span]));
      const ancestors = (span: ReadableSpan): ReadableSpan[] => {
        const parent = byId.get(span.parentSpanContext?.spanId ?? "");
        return parent ? [parent, ...ancestors(parent)] : [];
      };
      const nested = spans.filter(
        (span) => span.name === "transaction" && ancestors(span).some((above) => above.name === "transaction"),
      );
      expect(nested.map((span) => ancestors(span).map((above) => above.name))).toEqual([]);
      for (const span of spans.filter((span) => isClaim(textOf(span)))) expect(span.parentSpanContext).toBeUndefined();
    } finally {
      await live.dispose();
    }
  });
});
