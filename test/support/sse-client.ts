import { createClient, NetworkError } from "graphql-sse";
import type { GraphqlErrorBody } from "./graphql-client.ts";
import { eventually } from "./subscription-client.ts";
import type { TestServer } from "./test-server.ts";

/*
 * A real graphql-sse client (the `graphql-sse` package, distinct connections mode: one request per operation)
 * for tests: every message collected; a refusal keeps the response's status and GraphQL errors. No retries.
 */

export interface SseSubscription<Data = any> {
  /** The `data` of every `next` message, in order. */
  readonly data: Data[];
  /** The errors of `next` messages, and of a refused request's body. */
  readonly errors: GraphqlErrorBody[];
  /** Resolves when the server completed the operation, refused it or the stream broke. */
  readonly ended: Promise<void>;
  /** The HTTP status of a refused request, once refused. */
  status(): number | undefined;
  /** The `Retry-After` header of a refused request, once refused (null when it had none). */
  retryAfter(): string | null | undefined;
  /** Waits until at least `count` messages arrived; fails after `timeoutMs`. */
  waitFor(count: number, timeoutMs?: number): Promise<void>;
  /** Ends the operation and its connection. */
  dispose(): void;
}

export function sseUrl(server: Pick<TestServer, "url">): string {
  return `${server.url}/graphql/stream`;
}

export function subscribeOverSse<Data = any>(
  server: Pick<TestServer, "url" | "apiKey">,
  query: string,
  variables: Record<string, unknown> = {},
  options: { readonly apiKey?: string | null } = {},
): SseSubscription<Data> {
  const data: Data[] = [];
  const errors: GraphqlErrorBody[] = [];
  let status: number | undefined;
  let retryAfter: string | null | undefined;
  let endedResolve!: () => void;
  const ended = new Promise<void>((resolve) => (endedResolve = resolve));
  const apiKey = options.apiKey === undefined ? server.apiKey : options.apiKey;
  const client = createClient({
    url: sseUrl(server),
    headers: apiKey === null ? {} : { "x-api-key": apiKey },
    singleConnection: false,
    retryAttempts: 0,
  });
  const unsubscribe = client.subscribe<Data>(
    { query, variables },
    {
      next: (message) => {
        if (message.data) data.push(message.data as Data);
        if (message.errors) errors.push(...(message.errors as unknown as GraphqlErrorBody[]));
      },
      error: (error) => {
        void (async () => {
          const response = error instanceof NetworkError ? (error.response as Response | undefined) : undefined;
          if (response) {
            status = response.status;
            retryAfter = response.headers.get("retry-after");
            const body = (await response.json().catch(() => ({}))) as { errors?: GraphqlErrorBody[] };
            errors.push(...(body.errors ?? []));
          } else {
            errors.push({ message: String(error) });
          }
          endedResolve();
        })();
      },
      complete: () => endedResolve(),
    },
  );
  return {
    data,
    errors,
    ended,
    status: () => status,
    retryAfter: () => retryAfter,
    async waitFor(count, timeoutMs = 30_000) {
      await eventually(
        () => data.length >= count,
        timeoutMs,
        () => `${count} messages over SSE (got ${data.length}; errors ${JSON.stringify(errors)})`,
      );
    },
    dispose() {
      unsubscribe();
      client.dispose();
    },
  };
}
