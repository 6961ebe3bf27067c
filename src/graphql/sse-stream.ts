import type { ServerResponse } from "node:http";
import type { Response } from "graphql-sse";

/*
 * An SSE subscription's response on the socket (sse-server.ts): written as its messages come, each once the last
 * has left, so that a slow reader leaves its events in the subscription's bounded queue, not in memory here.
 */

/**
 * Writes graphql-sse's response: a refusal at once, or the event stream as its messages come, each after the
 * last has been taken by the socket. Ends the operation when the client goes away.
 */
export async function writeResponse(response: ServerResponse, body: Response[0], init: Response[1]): Promise<void> {
  response.writeHead(init.status, init.statusText, init.headers);
  if (body === null || typeof body === "string") {
    response.end(body ?? undefined);
    return;
  }
  const stop = () => void body.return(undefined);
  if (response.destroyed) return stop();
  response.once("close", stop);
  try {
    for await (const message of body) {
      if (!response.writable) break;
      if (!response.write(message)) await drained(response);
    }
  } finally {
    response.off("close", stop);
    response.end();
  }
}

/** Resolves once `response` may take more (or is gone). */
function drained(response: ServerResponse): Promise<void> {
  if (!response.writableNeedDrain || response.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      response.off("drain", done);
      response.off("close", done);
      resolve();
    };
    response.once("drain", done);
    response.once("close", done);
  });
}

/**
 * The subscription's results, each taken only once `response` has room: graphql-sse queues every result it takes
 * without bound, so what it is not yet able to send stays in the subscription, which bounds it. `return` reaches
 * the subscription at once, even while a result is awaited.
 */
export function pacedBy<T>(response: ServerResponse, source: AsyncIterator<T>): AsyncIterableIterator<T, undefined> {
  // With `return` and `throw`: graphql-sse ends only what looks like an async generator.
  const paced: Required<AsyncIterableIterator<T, undefined>> = {
    async next() {
      await drained(response);
      return (await source.next()) as IteratorResult<T, undefined>;
    },
    async return() {
      await source.return?.();
      return { done: true, value: undefined };
    },
    async throw(error: unknown) {
      await source.return?.();
      throw error;
    },
    [Symbol.asyncIterator]() {
      return paced;
    },
  };
  return paced;
}

export function isAsyncIterator(value: unknown): value is AsyncIterator<unknown> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value;
}
