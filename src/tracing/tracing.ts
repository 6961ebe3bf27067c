import type { Tracer } from "@opentelemetry/api";
import type { SpanExporter } from "@opentelemetry/sdk-trace-base";
import type { TracingSettings } from "../config.ts";

/*
 * OpenTelemetry traces, off by default and free when off (docs/decisions.md, "Traces"). Nothing of the SDK is
 * loaded unless tracing is on: this file imports types only, and the SDK (tracing-sdk.ts) comes in by a dynamic
 * import. When off, the code that would make spans holds `undefined` instead of a tracer and tests it once per
 * request, statement or message: no span object (not even a non-recording one), no context switch.
 *
 * The spans are placed by hand, where the work is, rather than by the contrib instrumentations that patch
 * modules as they load: the server is ES modules (patching `import`s needs a loader hook registered before the
 * app starts), its statements run on better-sqlite3 and pipelined node-postgres connections of its own
 * (src/store/sql/) that the pg instrumentation would see as connection-level noise without the store's
 * statement names, and Fastify's instrumentation makes a span per hook. Placed here, a request costs one span
 * per request, operation and statement.
 */

/** The spans' tracer and the end of their export. */
export interface Tracing {
  readonly tracer: Tracer;
  /** Exports the spans still buffered (graceful shutdown), then stops exporting. */
  shutdown(): Promise<void>;
}

/** What a test or the bench gives instead of the configured exporter. */
export interface SpanDestination {
  readonly exporter: SpanExporter;
  /** Spans exported in batches, as to a collector (the bench); by default one by one as they end (tests). */
  readonly batched?: boolean;
}

/**
 * The tracer, when tracing is on (`settings` from OTEL_* settings, or a `destination` given by a test); undefined
 * when off, without loading the SDK.
 */
export async function startTracing(
  settings: TracingSettings | null,
  destination?: SpanDestination,
): Promise<Tracing | undefined> {
  if (!settings && !destination) return undefined;
  const { startTracingSdk } = await import("./tracing-sdk.ts");
  return startTracingSdk(settings?.serviceName ?? "reftrail", destination ?? settings?.exporter ?? "otlp");
}
