import { context, propagation, ROOT_CONTEXT, type Tracer } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from "@opentelemetry/resources";
import {
  BatchSpanProcessor,
  ConsoleSpanExporter,
  SimpleSpanProcessor,
  type SpanExporter,
  type SpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from "@opentelemetry/semantic-conventions";
import { readFileSync } from "node:fs";
import { setBackgroundRunner } from "../domain/shared/background-work.ts";
import { PooledRandomIds } from "./pooled-ids.ts";

/*
 * The OpenTelemetry SDK, loaded only when tracing is on (tracing.ts). The provider is this app's own, not
 * registered as the process's global one: a process that runs two apps (tests) keeps their spans apart, and a
 * library that traces through the global API adds nothing unasked. What is process-wide is what must be: the
 * context manager and the W3C Trace Context propagator (`traceparent` in and out), each set once.
 *
 * The context manager is the SDK's own `AsyncLocalStorageContextManager`: it carries the active span across
 * awaits, timers, `setImmediate`, `process.nextTick` and emitters' callbacks, as Node carries an AsyncLocalStorage,
 * and is tested as such upstream. It is installed only here, so with traces off no context is carried at all. Being
 * carried everywhere, a context also reaches work that a request only sets off and that outlives it (the webhook
 * worker woken by a commit, the live feed's reads, a replay): that work starts in the root context itself
 * (src/domain/shared/background-work.ts, set below).
 *
 * The SDK reads its standard settings itself: OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout, compression),
 * OTEL_BSP_* (the batch's size and delay), OTEL_TRACES_SAMPLER(_ARG), OTEL_SPAN_*_LIMIT, OTEL_RESOURCE_ATTRIBUTES.
 */

const PACKAGE_VERSION = (
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
).version;

let processWideSet = false;

function setProcessWide(): void {
  if (processWideSet) return;
  processWideSet = true;
  // Each returns false when something set one first; that one is then used.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  setBackgroundRunner((work) => context.with(ROOT_CONTEXT, work));
}

/** A provider exporting to `destination` (spans batched for OTLP and the console, one by one for a test's). */
export function startTracingSdk(
  serviceName: string,
  destination: "otlp" | "console" | { readonly exporter: SpanExporter; readonly batched?: boolean },
): { readonly tracer: Tracer; shutdown(): Promise<void> } {
  setProcessWide();
  let processor: SpanProcessor;
  if (destination === "otlp") processor = new BatchSpanProcessor(new OTLPTraceExporter());
  else if (destination === "console") processor = new BatchSpanProcessor(new ConsoleSpanExporter());
  else if (destination.batched) processor = new BatchSpanProcessor(destination.exporter);
  else processor = new SimpleSpanProcessor(destination.exporter);
  const resource = defaultResource()
    .merge(detectResources({ detectors: [envDetector] }))
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName, [ATTR_SERVICE_VERSION]: PACKAGE_VERSION }));
  const provider = new NodeTracerProvider({
    resource,
    spanProcessors: [processor],
    idGenerator: new PooledRandomIds(),
  });
  const tracer: Tracer = provider.getTracer("reftrail", PACKAGE_VERSION);
  return { tracer, shutdown: () => provider.shutdown() };
}
