/*
 * The receiving end of bench/webhooks-drain.bench.ts, in a process of its own (forked with an IPC channel), so
 * that neither the server under test nor the bench shares its CPU accounting or its event loop: a plain node:http
 * server on 127.0.0.1 that answers every POST 200 at once, counts arrivals (distinct `webhook-id`s and repeats),
 * keeps the arrival time (performance.now()) of the first and the last request after a `mark`, and verifies the
 * signature of every `verifyEvery`-th request with the independent `standardwebhooks` package.
 *
 * Messages in:  { type: "verify", secret, verifyEvery } | { type: "mark" } | { type: "await", total }
 *             | { type: "close" }
 * Messages out: { type: "ready", port } | { type: "marked", arrivals } | { type: "reached", ...summary }
 *             | { type: "closed" }
 * "await" is answered once `total` distinct deliveries have arrived (at once if they already have).
 */
import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";

/** @type {Webhook | null} */
let verifier = null;
let verifyEvery = 100;
const seen = new Set();
let arrivals = 0;
let duplicates = 0;
let verified = 0;
let badSignatures = 0;
let connections = 0;
/** Arrivals after the last mark, and the first and last of them (performance.now() milliseconds). */
let sinceMark = 0;
let firstAfterMark = Number.NaN;
let lastAfterMark = Number.NaN;
/** @type {{ total: number } | null} */
let awaiting = null;

function summary() {
  return {
    arrivals,
    distinct: seen.size,
    duplicates,
    verified,
    badSignatures,
    connections,
    sinceMark,
    drainMs: lastAfterMark - firstAfterMark,
  };
}

function answerAwaitingIfReached() {
  if (!awaiting || seen.size < awaiting.total) return;
  awaiting = null;
  process.send({ type: "reached", ...summary() });
}

const server = createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    const now = performance.now();
    response.writeHead(200, { "content-type": "text/plain" }).end("ok");
    arrivals += 1;
    sinceMark += 1;
    if (sinceMark === 1) firstAfterMark = now;
    lastAfterMark = now;
    const id = String(request.headers["webhook-id"] ?? "");
    if (seen.has(id)) duplicates += 1;
    else seen.add(id);
    if (verifier && arrivals % verifyEvery === 1) {
      try {
        verifier.verify(Buffer.concat(chunks).toString("utf8"), request.headers);
        verified += 1;
      } catch {
        badSignatures += 1;
      }
    }
    answerAwaitingIfReached();
  });
});
server.on("connection", () => (connections += 1));
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => process.send({ type: "ready", port: server.address().port }));

process.on("message", (message) => {
  if (message.type === "verify") {
    verifier = new Webhook(message.secret);
    verifyEvery = message.verifyEvery ?? verifyEvery;
  } else if (message.type === "mark") {
    sinceMark = 0;
    firstAfterMark = Number.NaN;
    lastAfterMark = Number.NaN;
    process.send({ type: "marked", arrivals });
  } else if (message.type === "await") {
    awaiting = { total: message.total };
    answerAwaitingIfReached();
  } else if (message.type === "close") {
    server.closeAllConnections();
    server.close(() => {
      process.send({ type: "closed" });
      process.disconnect();
    });
  }
});
