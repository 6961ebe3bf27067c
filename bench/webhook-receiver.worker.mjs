/*
 * The receiving end of bench/webhooks.bench.ts, in its own thread (plain JavaScript: Node 20 does not apply
 * the tsx loader to a worker's entry), so that answering webhooks does not compete with the server's event
 * loop. It answers at once, or after `slowMs` for the paths listed in `slowPaths`, and records for each request
 * its path, webhook-id, the event's `occurred_at` and the arrival time (both Date.now() milliseconds). It counts
 * TCP connections, and verifies the signature of every `verifyEvery`-th request of a path whose secret it was
 * given with the independent `standardwebhooks` package.
 *
 * A `fail` message makes the requests of one path about one reference answer 503 for `forMs` milliseconds
 * (recorded, but not counted by `count`).
 *
 * Messages in: { type: "records", requestId, paths } | { type: "count", requestId, paths }
 *            | { type: "summary", requestId, paths } | { type: "verify", requestId, path, secret }
 *            | { type: "fail", requestId, path, referenceId, forMs } | { type: "close", requestId }
 * Messages out: { type: "ready", port } | { requestId, ...answer }
 */
import { createServer } from "node:http";
import { parentPort, workerData } from "node:worker_threads";
import { Webhook } from "standardwebhooks";

const slowPaths = new Set(workerData.slowPaths ?? []);
const slowMs = workerData.slowMs ?? 5_000;
const verifyEvery = workerData.verifyEvery ?? 10;
/** @type {Map<string, { webhookId: string, occurredAt: number, receivedAt: number }[]>} */
const recordsByPath = new Map();
/** @type {Map<string, { referenceId: string, until: number }>} */
const failing = new Map();
/** @type {Map<string, Webhook>} */
const verifiers = new Map();
const pending = new Set();
let connections = 0;
let verified = 0;
let badSignatures = 0;

const server = createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    const receivedAt = Date.now();
    const path = request.url ?? "/";
    const text = Buffer.concat(chunks).toString("utf8");
    let occurredAt = Number.NaN;
    let referenceId = null;
    try {
      const body = JSON.parse(text);
      occurredAt = Date.parse(body.occurred_at);
      referenceId = body.reference_id;
    } catch {
      // counted with an unknown latency
    }
    const failure = failing.get(path);
    const status = failure && failure.referenceId === referenceId && receivedAt < failure.until ? 503 : 200;
    let records = recordsByPath.get(path);
    if (!records) recordsByPath.set(path, (records = []));
    records.push({
      webhookId: String(request.headers["webhook-id"] ?? ""),
      occurredAt,
      receivedAt,
      referenceId,
      status,
    });
    const verifier = verifiers.get(path);
    if (verifier && records.length % verifyEvery === 1) {
      try {
        verifier.verify(text, request.headers);
        verified++;
      } catch {
        badSignatures++;
      }
    }
    const answer = () => {
      pending.delete(response);
      if (!response.destroyed) response.writeHead(status, { "content-type": "text/plain" }).end("ok");
    };
    if (slowPaths.has(path)) {
      pending.add(response);
      setTimeout(answer, slowMs);
    } else {
      answer();
    }
  });
});
server.on("connection", () => connections++);
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => parentPort.postMessage({ type: "ready", port: server.address().port }));

const recordsOf = (paths) => paths.flatMap((path) => recordsByPath.get(path) ?? []);
const answeredOf = (paths) => recordsOf(paths).filter((record) => record.status === 200);

parentPort.on("message", (message) => {
  const reply = (answer) => parentPort.postMessage({ requestId: message.requestId, ...answer });
  if (message.type === "records") {
    reply({ records: answeredOf(message.paths) });
  } else if (message.type === "count") {
    reply({ count: answeredOf(message.paths).length });
  } else if (message.type === "fail") {
    failing.set(message.path, { referenceId: message.referenceId, until: Date.now() + message.forMs });
    reply({});
  } else if (message.type === "summary") {
    const records = recordsOf(message.paths);
    reply({
      count: records.length,
      duplicates: records.length - new Set(records.map((record) => record.webhookId)).size,
      connections,
      verified,
      badSignatures,
    });
  } else if (message.type === "verify") {
    verifiers.set(message.path, new Webhook(message.secret));
    reply({});
  } else if (message.type === "close") {
    for (const response of pending) response.destroy();
    server.closeAllConnections();
    server.close(() => reply({ closed: true }));
  }
});
