import { readFileSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import { isIP } from "node:net";
import { RefusedTargetError, type AddressGuard } from "./address-guard.ts";
import { signWebhook } from "./webhook-signature.ts";

/*
 * One HTTP POST of a webhook (SPEC §9) with node:http(s): signed headers, a timeout covering connection,
 * response and body, no redirects followed, and the response read with a cap. Every outcome is returned, never
 * thrown, so that the worker can record it as an attempt.
 */

const PACKAGE_VERSION = (
  JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }
).version;
export const WEBHOOK_USER_AGENT = `reftrail-webhooks/${PACKAGE_VERSION}`;

/** The part of a response kept in the attempt log. */
export const RESPONSE_LOG_BYTES = 2_048;
/** Past this many response bytes the connection is dropped instead of drained for reuse. */
const RESPONSE_DRAIN_BYTES = 64 * 1024;
const MAX_ERROR_LENGTH = 500;

export interface WebhookRequest {
  readonly url: string;
  /** The delivery id: the `webhook-id` header. */
  readonly webhookId: string;
  readonly body: string;
  /** The secrets that sign it (two during a rotation). */
  readonly secrets: readonly string[];
  /** The `webhook-timestamp`. */
  readonly timestamp: Date;
}

export interface SendResult {
  readonly statusCode: number | null;
  readonly error: string | null;
  readonly latencyMs: number;
  /** The first 2 KB of the response body. */
  readonly responseBody: string | null;
  readonly retryAfter: string | undefined;
  /** True when `signal` stopped the request (shutdown): not an attempt to record. */
  readonly aborted: boolean;
}

export interface WebhookSenderOptions {
  readonly guard: AddressGuard;
  readonly timeoutMs: number;
  /** Sockets per host: at least the worker's concurrency, so that no request waits for a socket. */
  readonly maxSocketsPerHost: number;
}

export class WebhookSender {
  private readonly httpAgent: http.Agent;
  private readonly httpsAgent: https.Agent;

  constructor(private readonly options: WebhookSenderOptions) {
    const agentOptions = { keepAlive: true, maxSockets: options.maxSocketsPerHost, timeout: options.timeoutMs };
    this.httpAgent = new http.Agent(agentOptions);
    this.httpsAgent = new https.Agent(agentOptions);
  }

  send(request: WebhookRequest, signal?: AbortSignal): Promise<SendResult> {
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

    let url: URL;
    try {
      url = new URL(request.url);
    } catch {
      return Promise.resolve(failed("invalid url"));
    }
    // A name is checked by the guarded lookup below; an address literal never reaches a lookup.
    const literal = url.hostname.replace(/^\[(.*)\]$/, "$1");
    if (isIP(literal) !== 0) {
      const reason = this.options.guard.refusalReason(literal);
      if (reason) return Promise.resolve(failed(`target refused: ${reason}`));
    }

    const timestamp = Math.floor(request.timestamp.getTime() / 1000);
    const body = Buffer.from(request.body, "utf8");
    const isHttps = url.protocol === "https:";
    return new Promise<SendResult>((resolve) => {
      let settled = false;
      let statusCode: number | null = null;
      let retryAfter: string | undefined;
      const kept: Buffer[] = [];
      let keptBytes = 0;
      let readBytes = 0;

      const finish = (result: SendResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        resolve(result);
      };
      const responseResult = (note: string | null): SendResult => ({
        statusCode,
        error:
          note ?? (statusCode !== null && statusCode >= 300 && statusCode < 400 ? "redirects are not followed" : null),
        latencyMs: elapsed(),
        responseBody: keptBytes > 0 ? Buffer.concat(kept).toString("utf8") : "",
        retryAfter,
        aborted: false,
      });

      const req = (isHttps ? https : http).request(url, {
        method: "POST",
        agent: isHttps ? this.httpsAgent : this.httpAgent,
        lookup: this.options.guard.lookup,
        headers: {
          "content-type": "application/json",
          "content-length": String(body.length),
          "user-agent": WEBHOOK_USER_AGENT,
          "webhook-id": request.webhookId,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": signWebhook(request.secrets, request.webhookId, timestamp, request.body),
        },
      });

      // One deadline for everything. When it passes after the status arrived, the status stands (with the body
      // read so far); before that, the attempt timed out.
      const timer = setTimeout(() => {
        if (statusCode !== null) finish(responseResult(null));
        else finish(failed(`timed out after ${this.options.timeoutMs} ms`));
        req.destroy();
      }, this.options.timeoutMs);
      const onAbort = () => {
        finish(failed("aborted: the server is shutting down", true));
        req.destroy();
      };
      if (signal?.aborted) onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });

      req.on("response", (response) => {
        statusCode = response.statusCode ?? null;
        const header = response.headers["retry-after"];
        retryAfter = Array.isArray(header) ? header[0] : header;
        response.on("data", (chunk: Buffer) => {
          readBytes += chunk.length;
          if (keptBytes < RESPONSE_LOG_BYTES) {
            const part = chunk.subarray(0, RESPONSE_LOG_BYTES - keptBytes);
            kept.push(part);
            keptBytes += part.length;
          }
          if (readBytes > RESPONSE_DRAIN_BYTES) {
            // Enough: the status is known and the log has its 2 KB. Drop the connection rather than read on.
            finish(responseResult(null));
            response.destroy();
          }
        });
        response.on("end", () => finish(responseResult(null)));
        response.on("error", () => finish(responseResult(null)));
        response.on("aborted", () => finish(responseResult(null)));
      });
      req.on("error", (error: NodeJS.ErrnoException) => {
        if (statusCode !== null) return finish(responseResult(null));
        if (error instanceof RefusedTargetError) return finish(failed(`target refused: ${error.message}`));
        finish(failed(error.code ? `${error.code}: ${error.message}` : error.message));
      });
      req.end(body);
    });
  }

  /** Closes idle keep-alive sockets. */
  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}
