import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Tracer } from "@opentelemetry/api";
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_SERVER_ADDRESS,
} from "@opentelemetry/semantic-conventions";

/*
 * One span per webhook delivery attempt (kind client), the root of a trace of its own: deliveries are sent in
 * the background, long after (and apart from) the request that wrote their event. The request carries the
 * span's `traceparent` (W3C Trace Context), so a receiver that traces joins the attempt's trace; Standard
 * Webhooks receivers ignore headers they do not know, and the signature covers the id, timestamp and body only.
 */

export const WEBHOOK_ENDPOINT_ID = "reftrail.webhook.endpoint_id";
export const WEBHOOK_DELIVERY_ID = "reftrail.webhook.delivery_id";
export const WEBHOOK_ATTEMPT = "reftrail.webhook.attempt";

export interface TracedAttempt {
  readonly endpointId: string | undefined;
  readonly deliveryId: string;
  /** 1 for the first attempt of the delivery. */
  readonly attempt: number | undefined;
  /** The receiver's host (the URL's path and query are not recorded: they may hold a token). */
  readonly host: string;
}

/** What an attempt came to, as the sender reports it. */
interface AttemptResult {
  readonly statusCode: number | null;
  readonly error: string | null;
  readonly aborted: boolean;
}

/** Runs `send` in a span of its own; `send` gets the `traceparent` header value to send. */
export async function traceWebhookAttempt<Result extends AttemptResult>(
  tracer: Tracer,
  attempt: TracedAttempt,
  send: (traceparent: string | undefined) => Promise<Result>,
): Promise<Result> {
  const span = tracer.startSpan(
    "webhook delivery",
    {
      kind: SpanKind.CLIENT,
      root: true,
      attributes: {
        [ATTR_HTTP_REQUEST_METHOD]: "POST",
        [ATTR_SERVER_ADDRESS]: attempt.host,
        [WEBHOOK_ENDPOINT_ID]: attempt.endpointId,
        [WEBHOOK_DELIVERY_ID]: attempt.deliveryId,
        [WEBHOOK_ATTEMPT]: attempt.attempt,
      },
    },
    ROOT_CONTEXT,
  );
  const headers: { traceparent?: string } = {};
  propagation.inject(trace.setSpan(ROOT_CONTEXT, span), headers);
  try {
    const result = await context.with(trace.setSpan(ROOT_CONTEXT, span), () => send(headers.traceparent));
    if (result.statusCode !== null) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, result.statusCode);
    if (result.aborted) span.setAttribute(ATTR_ERROR_TYPE, "aborted");
    else if (result.statusCode === null || result.statusCode >= 300) {
      span.setAttribute(ATTR_ERROR_TYPE, result.statusCode === null ? "network_error" : String(result.statusCode));
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    return result;
  } finally {
    span.end();
  }
}
