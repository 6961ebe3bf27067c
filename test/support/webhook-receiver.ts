import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { Webhook } from "standardwebhooks";

/*
 * A real HTTP receiver on loopback for webhook tests. Every request is recorded and, when secrets are
 * registered for its path, checked with the independent `standardwebhooks` package (not the project's own
 * signing code): `verifiedBy` lists the secrets whose signature it carries.
 */

export interface ReceivedWebhook {
  readonly path: string;
  readonly webhookId: string;
  readonly timestamp: string;
  readonly signature: string;
  readonly headers: IncomingHttpHeaders;
  /** The raw body text. */
  readonly body: string;
  readonly json: any;
  /** The registered secrets of the path whose signature verifies (timestamp tolerance included). */
  readonly verifiedBy: readonly string[];
  /** performance.now() at arrival. */
  readonly receivedAt: number;
}

/**
 * What the receiver answers; `delayMs` waits before answering (a slow endpoint); `until` holds the request
 * unanswered until the promise settles (an endpoint that answers when the test lets it, or never).
 */
export interface Reply {
  readonly status?: number;
  readonly headers?: Record<string, string>;
  /** Text, or bytes as they are (a receiver answering invalid UTF-8). */
  readonly body?: string | Buffer;
  readonly delayMs?: number;
  readonly until?: Promise<unknown>;
}

/** A request held by `until` never gets an answer (the receiver's close drops it). */
export const NEVER: Promise<never> = new Promise<never>(() => {});

/** Decides the reply to the `count`-th request (1-based) for one path. */
export type Responder = (request: { webhookId: string; count: number; json: any }) => Reply;

export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  private readonly responders = new Map<string, Responder>();
  private readonly secrets = new Map<string, string[]>();
  private readonly counts = new Map<string, number>();
  private readonly pending = new Set<ServerResponse>();
  /** TCP connections accepted so far (a sender that pools keep-alive connections opens few). */
  connections = 0;

  private constructor(
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(): Promise<WebhookReceiver> {
    let receiver: WebhookReceiver | undefined;
    const server = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on("data", (chunk: Buffer) => chunks.push(chunk));
      request.on("end", () =>
        receiver!.handle(request.url ?? "/", request.headers, Buffer.concat(chunks).toString("utf8"), response),
      );
    });
    server.keepAliveTimeout = 30_000;
    server.on("connection", () => receiver!.connections++);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    receiver = new WebhookReceiver(server, (server.address() as AddressInfo).port);
    return receiver;
  }

  /** A URL on this receiver; each test uses its own path. */
  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  respond(path: string, responder: Responder): void {
    this.responders.set(path, responder);
  }

  /** Secrets to verify the path's requests with (replaces earlier ones). */
  verifyWith(path: string, ...secrets: string[]): void {
    this.secrets.set(path, secrets);
  }

  on(path: string): ReceivedWebhook[] {
    return this.received.filter((hook) => hook.path === path);
  }

  /** Polls every 20 ms until `check` returns a truthy value, for at most `timeoutMs`. */
  async waitFor<T>(check: () => T | undefined | null | false, timeoutMs = 10_000, what = "webhooks"): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = check();
      if (value) return value;
      if (Date.now() > deadline)
        throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (received ${this.received.length})`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** Resolves when `path` has received at least `count` requests. */
  waitForCount(path: string, count: number, timeoutMs = 10_000): Promise<ReceivedWebhook[]> {
    return this.waitFor(
      () => (this.on(path).length >= count ? this.on(path) : null),
      timeoutMs,
      `${count} requests on ${path}`,
    );
  }

  async close(): Promise<void> {
    for (const response of this.pending) response.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(path: string, headers: IncomingHttpHeaders, body: string, response: ServerResponse): void {
    let json: any = null;
    try {
      json = JSON.parse(body);
    } catch {
      // recorded as text
    }
    const verifiedBy = (this.secrets.get(path) ?? []).filter((secret) => {
      try {
        new Webhook(secret).verify(body, headers as Record<string, string>);
        return true;
      } catch {
        return false;
      }
    });
    const webhookId = String(headers["webhook-id"] ?? "");
    this.received.push({
      path,
      webhookId,
      timestamp: String(headers["webhook-timestamp"] ?? ""),
      signature: String(headers["webhook-signature"] ?? ""),
      headers,
      body,
      json,
      verifiedBy,
      receivedAt: performance.now(),
    });
    const count = (this.counts.get(path) ?? 0) + 1;
    this.counts.set(path, count);
    const reply = this.responders.get(path)?.({ webhookId, count, json }) ?? {};
    const send = () => {
      this.pending.delete(response);
      if (response.destroyed) return;
      response.writeHead(reply.status ?? 200, { "content-type": "text/plain", ...reply.headers });
      response.end(reply.body ?? "ok");
    };
    if (reply.until) {
      this.pending.add(response);
      void reply.until.finally(send);
    } else if (reply.delayMs) {
      this.pending.add(response);
      setTimeout(send, reply.delayMs);
    } else {
      send();
    }
  }
}
