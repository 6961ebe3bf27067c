import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import type { IncomingHttpHeaders } from "node:http";
import type { Agent, buildConnector, Dispatcher } from "undici";
import { ATTEMPT_TEXT_MAX_BYTES } from "../domain/webhooks/attempt-text.ts";
import { portOf, RefusedTargetError, type AddressGuard } from "./address-guard.ts";
import { signWebhook } from "./webhook-signature.ts";
import type { Tracer } from "@opentelemetry/api";
import { traceWebhookAttempt } from "../tracing/webhook-spans.ts";

/*
 * One HTTP POST of a webhook: signed headers, a timeout covering connection, response and body, no
 * redirects followed, and the response read with a cap. Every outcome is returned, never thrown, so that the
 * worker can record it as an attempt.
 *
 * Requests go through one undici Agent, which keeps a pool of keep-alive connections per origin (at most
 * `connectionsPerOrigin` each): at hundreds of deliveries per second a new TCP (and TLS) connection per request
 * would cost more than the request. Pooling does not weaken the SSRF guard: every new connection resolves its
 * name through the guard's lookup (undici hands `connect` options to net/tls.connect), so a connection only ever
 * exists to an address that was checked when it was opened; an address literal never reaches a lookup and is
 * checked here, before the pool is asked.
 */

const PACKAGE_VERSION = (
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
).version;
export const WEBHOOK_USER_AGENT = `reftrail-webhooks/${PACKAGE_VERSION}`;

/** The part of a response kept in the attempt log. */
const RESPONSE_LOG_BYTES = ATTEMPT_TEXT_MAX_BYTES;
/** Past this many response bytes the connection is dropped instead of drained for reuse. */
const RESPONSE_DRAIN_BYTES = 64 * 1024;
const MAX_ERROR_LENGTH = 500;
/** How long an idle pooled connection is kept (unless the receiver's keep-alive hint says less). */
const KEEP_ALIVE_MS = 30_000;

export interface WebhookRequest {
  readonly url: string;
  /** The delivery id: the `webhook-id` header. */
  readonly webhookId: string;
  readonly body: string;
  /** The secrets that sign it (two during a rotation). */
  readonly secrets: readonly string[];
  /** The `webhook-timestamp`. */
  readonly timestamp: Date;
  /** For its trace span (when tracing is on): the endpoint, and which attempt of the delivery this is (1-based). */
  readonly endpointId?: string;
  readonly attempt?: number;
}

export interface SendResult {
  readonly statusCode: number | null;
  readonly error: string | null;
  readonly latencyMs: number;
  /**
   * The first 2 KB of the response body, decoded as UTF-8 with replacement (the receiver's bytes may be anything;
   * the attempt log makes the text storable, src/domain/webhooks/attempt-text.ts).
   */
  readonly responseBody: string | null;
  readonly retryAfter: string | undefined;
  /** True when `signal` stopped the request (shutdown): not an attempt to record. */
  readonly aborted: boolean;
}

export interface WebhookSenderOptions {
  readonly guard: AddressGuard;
  readonly timeoutMs: number;
  /**
   * Keep-alive connections per origin: at least the worker's concurrency, so that endpoints sharing a host never
   * queue behind one another's slow requests.
   */
  readonly connectionsPerOrigin: number;
  /** When tracing is on: a span per attempt, whose `traceparent` the request carries (src/tracing/). */
  readonly tracer?: Tracer;
}

/** What a target URL resolves to before any connection: where to send, or why not. */
type Target = { readonly origin: string; readonly path: string } | { readonly refused: string };

/** Targets remembered, at most (emptied when full: a refill costs one parse per endpoint). */
const MAX_TARGETS = 10_000;

/** Why a request failed, from undici's or the socket's error. */
function describeError(error: unknown): string {
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : null;
  for (const candidate of [error, cause]) {
    if (candidate instanceof RefusedTargetError) return `target refused: ${candidate.message}`;
  }
  const failure = (cause ?? error) as NodeJS.ErrnoException;
  if (!(failure instanceof Error)) return String(failure);
  return failure.code && !failure.message.includes(failure.code)
    ? `${failure.code}: ${failure.message}`
    : failure.message;
}

/**
 * One request's response as undici's dispatcher hands it over (`Dispatcher.DispatchHandler`): its status, its
 * `Retry-After`, and its first 2 KB. undici's `request()` wraps every response in a readable stream (and the loop
 * that read it in an async iterator): on loopback that cost about 60 µs of CPU per request, against about 38 µs
 * with this handler, on the worker's busiest path. Past RESPONSE_DRAIN_BYTES the request is aborted, which drops
 * the connection rather than reading on.
 */
class ResponseExcerpt implements Dispatcher.DispatchHandler {
  statusCode: number | null = null;
  retryAfter: string | undefined;
  /** Resolves once, when the request ended, failed or was stopped: null when the response was read whole. */
  readonly settled: Promise<Error | null>;
  private settle!: (error: Error | null) => void;
  private done = false;
  private controller: Dispatcher.DispatchController | null = null;
  /** A stop that came before undici began the request: applied as soon as it does. */
  private stoppedBy: Error | null = null;
  private readonly kept: Buffer[] = [];
  private keptBytes = 0;
  private readBytes = 0;

  constructor() {
    this.settled = new Promise((resolve) => (this.settle = resolve));
  }

  /** Ends the request now (the deadline, a shutdown), and the wait for it with it. */
  stop(reason: Error): void {
    if (this.done) return;
    if (this.controller) {
      if (!this.controller.aborted) this.controller.abort(reason);
    } else {
      this.stoppedBy = reason;
    }
    this.finish(reason);
  }

  /**
   * The kept bytes as text: invalid UTF-8 becomes U+FFFD. When the 2 KB cut ended inside a character, that
   * character is left out rather than logged as a replacement the receiver never sent.
   */
  excerpt(): string {
    return new TextDecoder().decode(Buffer.concat(this.kept), { stream: this.readBytes > this.keptBytes });
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.stoppedBy) controller.abort(this.stoppedBy);
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    if (statusCode < 200) return; // informational: the final status follows
    this.statusCode = statusCode;
    const header = headers["retry-after"];
    this.retryAfter = Array.isArray(header) ? header[0] : header;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.readBytes += chunk.length;
    if (this.keptBytes < RESPONSE_LOG_BYTES) {
      const part = chunk.subarray(0, RESPONSE_LOG_BYTES - this.keptBytes);
      this.kept.push(part);
      this.keptBytes += part.length;
    }
    // Enough: the status is known and the log has its 2 KB. Drop the connection rather than read on.
    if (this.readBytes > RESPONSE_DRAIN_BYTES && !controller.aborted) {
      controller.abort(new Error("response body past the drain limit"));
    }
  }

  onResponseEnd(): void {
    this.finish(null);
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    this.finish(error);
  }

  private finish(error: Error | null): void {
    if (this.done) return;
    this.done = true;
    this.settle(error);
  }
}

export class WebhookSender {
  /**
   * The pool, made by the first request: undici is over a hundred modules, which a start need not load before a
   * webhook is due.
   */
  private agent: Promise<Agent> | null = null;
  /**
   * Parsed targets by URL: an endpoint's URL rarely changes, and parsing it and checking an address literal again
   * for every request was repeated work on the worker's busiest path. The check's answer depends only on the URL
   * and the guard's fixed allow-list, so it may be kept.
   */
  private readonly targets = new Map<string, Target>();

  constructor(private readonly options: WebhookSenderOptions) {}

  private pool(): Promise<Agent> {
    this.agent ??= import("undici").then(
      ({ Agent, buildConnector }) =>
        new Agent({
          connections: this.options.connectionsPerOrigin,
          keepAliveTimeout: KEEP_ALIVE_MS,
          keepAliveMaxTimeout: KEEP_ALIVE_MS,
          // The deadline of the whole request is ours (below); these only must not cut it shorter.
          headersTimeout: 0,
          bodyTimeout: 0,
          // One connector per port: an allow-list entry may name a port, and a lookup is not told the port.
          connect: connectorsByPort((port) =>
            buildConnector({ lookup: this.options.guard.lookupFor(port), timeout: this.options.timeoutMs }),
          ),
        }),
    );
    return this.agent;
  }

  async send(request: WebhookRequest, signal?: AbortSignal): Promise<SendResult> {
    const tracer = this.options.tracer;
    if (!tracer) return this.sendOnce(request, signal, undefined);
    const target = this.target(request.url);
    const attempt = {
      endpointId: request.endpointId,
      deliveryId: request.webhookId,
      attempt: request.attempt,
      host: "origin" in target ? new URL(target.origin).host : "",
    };
    return traceWebhookAttempt(tracer, attempt, (traceparent) => this.sendOnce(request, signal, traceparent));
  }

  private async sendOnce(
    request: WebhookRequest,
    signal: AbortSignal | undefined,
    traceparent: string | undefined,
  ): Promise<SendResult> {
    // The pool (and undici with it) is made before the clock starts: loading undici for the first request is not
    // the receiver's time, neither for the deadline nor for the latency.
    const agent = await this.pool();
    const started = performance.now();
    const elapsed = () => performance.now() - started;
    const failed = (error: string, aborted = false): SendResult => ({
      statusCode: null,
      error: error.slice(0, MAX_ERROR_LENGTH),
      latencyMs: elapsed(),
      responseBody: null,
      retryAfter: undefined,
      aborted,
    });

    const target = this.target(request.url);
    if ("refused" in target) return failed(target.refused);
    if (signal?.aborted) return failed("aborted: the server is shutting down", true);

    // One deadline for everything. When it passes after the status arrived, the status stands (with the body
    // read so far); before that, the attempt timed out.
    const response = new ResponseExcerpt();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      response.stop(new Error(`timed out after ${this.options.timeoutMs} ms`));
    }, this.options.timeoutMs);
    const onAbort = () => response.stop(new Error("aborted: the server is shutting down"));
    signal?.addEventListener("abort", onAbort, { once: true });

    const timestamp = Math.floor(request.timestamp.getTime() / 1000);
    let error: Error | null;
    try {
      agent.dispatch(
        {
          origin: target.origin,
          path: target.path,
          method: "POST",
          headers: {
            "content-type": "application/json",
            "user-agent": WEBHOOK_USER_AGENT,
            "webhook-id": request.webhookId,
            "webhook-timestamp": String(timestamp),
            "webhook-signature": signWebhook(request.secrets, request.webhookId, timestamp, request.body),
            ...(traceparent ? { traceparent } : {}),
          },
          body: request.body,
        },
        response,
      );
      error = await response.settled;
    } catch (thrown) {
      error = thrown instanceof Error ? thrown : new Error(String(thrown));
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
    if (signal?.aborted && !timedOut) return failed("aborted: the server is shutting down", true);
    const { statusCode } = response;
    if (statusCode === null) {
      if (timedOut) return failed(`timed out after ${this.options.timeoutMs} ms`);
      return failed(describeError(error));
    }
    // The deadline or the receiver may have cut the body short: the status stands, with what was read.
    return {
      statusCode,
      error: statusCode >= 300 && statusCode < 400 ? "redirects are not followed" : null,
      latencyMs: elapsed(),
      responseBody: response.excerpt(),
      retryAfter: response.retryAfter,
      aborted: false,
    };
  }

  private target(rawUrl: string): Target {
    let target = this.targets.get(rawUrl);
    if (target) return target;
    target = this.parseTarget(rawUrl);
    if (this.targets.size >= MAX_TARGETS) this.targets.clear();
    this.targets.set(rawUrl, target);
    return target;
  }

  private parseTarget(rawUrl: string): Target {
    let url: URL;
    try {
      url = new URL(rawUrl);
    } catch {
      return { refused: "invalid url" };
    }
    // A name is checked by the guarded lookup of each new connection; an address literal never reaches a lookup.
    const literal = url.hostname.replace(/^\[(.*)\]$/, "$1");
    if (isIP(literal) !== 0) {
      const reason = this.options.guard.refusalReason(literal, portOf(url));
      if (reason) return { refused: `target refused: ${reason}` };
    }
    return { origin: url.origin, path: `${url.pathname}${url.search}` };
  }

  /** Closes the pooled connections (requests still in flight are aborted by the worker first). */
  async close(): Promise<void> {
    if (this.agent) await (await this.agent).destroy();
  }
}

/** Connectors made on first use per destination port (bounded: tenants choose ports). */
function connectorsByPort(make: (port: number) => buildConnector.connector): buildConnector.connector {
  const connectors = new Map<number, buildConnector.connector>();
  return (options, callback) => {
    const port = Number(options.port) || (options.protocol === "https:" ? 443 : 80);
    let connector = connectors.get(port);
    if (!connector) {
      if (connectors.size >= 1_024) connectors.clear();
      connector = make(port);
      connectors.set(port, connector);
    }
    return connector(options, callback);
  };
}
