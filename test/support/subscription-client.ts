import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";
import type { GraphqlErrorBody } from "./graphql-client.ts";
import type { TestServer } from "./test-server.ts";

/*
 * A real graphql-ws client (the `graphql-ws` package over `ws`) for tests: one connection, one operation, every
 * message collected. No retries: a closed connection stays closed, and its close code is kept.
 */

export interface CloseInfo {
  readonly code: number;
  readonly reason: string;
}

export interface SubscriptionOptions {
  /** connection_init payload; by default `{ "x-api-key": <the server's key> }`. */
  readonly connectionParams?: Record<string, unknown>;
  /** Sent in the subscribe message's `extensions` (GraphiQL puts its headers there). */
  readonly extensions?: Record<string, unknown>;
}

export interface TestSubscription<Data = any> {
  /** The `data` of every `next` message, in order. */
  readonly data: Data[];
  /** The errors of `next` messages and of an `error` message. */
  readonly errors: GraphqlErrorBody[];
  /** Resolves when the server completed the operation or the connection closed. */
  readonly ended: Promise<void>;
  /** The close of the connection, once it happened. */
  closeInfo(): CloseInfo | undefined;
  /** Waits until at least `count` messages arrived (or the predicate holds); fails after `timeoutMs`. */
  waitFor(count: number | (() => boolean), timeoutMs?: number): Promise<void>;
  /** Waits for the connection to close; returns its code and reason. */
  waitForClose(timeoutMs?: number): Promise<CloseInfo>;
  /** Unsubscribes and closes the connection. */
  dispose(): Promise<void>;
}

export function graphqlWsUrl(server: Pick<TestServer, "url">): string {
  return `${server.url.replace(/^http/, "ws")}/graphql`;
}

/** Polls `condition` every 20 ms until it holds; throws `describe()` after `timeoutMs`. */
export async function eventually(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 30_000,
  describe = () => "condition",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${describe()}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export function subscribe<Data = any>(
  server: Pick<TestServer, "url" | "apiKey">,
  query: string,
  variables: Record<string, unknown> = {},
  options: SubscriptionOptions = {},
): TestSubscription<Data> {
  const data: Data[] = [];
  const errors: GraphqlErrorBody[] = [];
  let closed: CloseInfo | undefined;
  let endedResolve!: () => void;
  const ended = new Promise<void>((resolve) => (endedResolve = resolve));
  const client: Client = createClient({
    url: graphqlWsUrl(server),
    webSocketImpl: WebSocket,
    connectionParams: options.connectionParams ?? { "x-api-key": server.apiKey },
    retryAttempts: 0,
    lazy: true,
    on: {
      closed: (event) => {
        const { code, reason } = event as { code: number; reason: string };
        closed = { code, reason };
        endedResolve();
      },
    },
  });
  const unsubscribe = client.subscribe<Data>(
    { query, variables, ...(options.extensions && { extensions: options.extensions }) },
    {
      next: (message) => {
        if (message.data) data.push(message.data as Data);
        if (message.errors) errors.push(...(message.errors as GraphqlErrorBody[]));
      },
      error: (error) => {
        if (Array.isArray(error)) errors.push(...(error as GraphqlErrorBody[]));
        endedResolve();
      },
      complete: () => endedResolve(),
    },
  );
  const subscription: TestSubscription<Data> = {
    data,
    errors,
    ended,
    closeInfo: () => closed,
    async waitFor(count, timeoutMs = 30_000) {
      const done = typeof count === "number" ? () => data.length >= count : count;
      await eventually(done, timeoutMs, () =>
        typeof count === "number"
          ? `${count} messages (got ${data.length}; errors ${JSON.stringify(errors)}; close ${JSON.stringify(closed)})`
          : `a condition on ${data.length} messages`,
      );
    },
    async waitForClose(timeoutMs = 30_000) {
      await eventually(
        () => closed !== undefined,
        timeoutMs,
        () => "the connection to close",
      );
      return closed!;
    },
    async dispose() {
      unsubscribe();
      await client.dispose();
    },
  };
  return subscription;
}

/** The value of one metric of the server's `/metrics` (0 when absent). */
export async function metricValue(server: Pick<TestServer, "url">, name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = text.split("\n").find((row) => row.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

/** Waits until the server has at least `count` open lifecycleEvents subscriptions. */
export async function waitForOpenSubscriptions(
  server: Pick<TestServer, "url">,
  count: number,
  timeoutMs = 30_000,
): Promise<void> {
  await eventually(
    async () => (await metricValue(server, "reftrail_subscriptions_open")) >= count,
    timeoutMs,
    () => `${count} open subscriptions`,
  );
}
