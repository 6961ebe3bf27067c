/*
 * The client half of subscriptions.bench.ts, in its own process so that the server's memory is measured alone
 * (plain JavaScript: a forked child needs no loader). Opens one graphql-ws connection per subscription, each
 * subscribed to one reference's events, and records when each event arrives (epoch milliseconds, sub-ms
 * precision: `performance.timeOrigin + performance.now()`, comparable with the parent's clock).
 *
 * Messages from the parent: { type: "open", url, apiKey, referenceIds, query } then { type: "collect", expected }.
 * Messages to the parent: { type: "opened" }, { type: "received", receipts: [[eventId, at], ...], errors }.
 */
import { createClient } from "graphql-ws";
import WebSocket from "ws";

const now = () => performance.timeOrigin + performance.now();
/** @type {Map<string, number>} */
const receipts = new Map();
/** @type {string[]} */
const errors = [];
/** @type {import("graphql-ws").Client[]} */
const clients = [];
let expected = Number.POSITIVE_INFINITY;

function reportWhenDone() {
  if (receipts.size < expected) return;
  expected = Number.POSITIVE_INFINITY;
  process.send({ type: "received", receipts: [...receipts], errors });
}

process.on("message", (message) => {
  if (message.type === "open") {
    for (const referenceId of message.referenceIds) {
      const client = createClient({
        url: message.url,
        webSocketImpl: WebSocket,
        connectionParams: { "x-api-key": message.apiKey },
        retryAttempts: 0,
        lazy: true,
      });
      clients.push(client);
      client.subscribe(
        { query: message.query, variables: { referenceId } },
        {
          next: (result) => {
            const id = result.data?.lifecycleEvents?.node?.id;
            if (id && !receipts.has(id)) receipts.set(id, now());
            if (result.errors) errors.push(JSON.stringify(result.errors));
            reportWhenDone();
          },
          error: (error) => errors.push(String(error?.reason ?? error?.message ?? JSON.stringify(error))),
          complete: () => undefined,
        },
      );
    }
    process.send({ type: "opened" });
  } else if (message.type === "collect") {
    expected = message.expected;
    reportWhenDone();
  } else if (message.type === "report") {
    process.send({ type: "received", receipts: [...receipts], errors });
  } else if (message.type === "stop") {
    void Promise.allSettled(clients.map((client) => client.dispose())).then(() => process.exit(0));
  }
});
