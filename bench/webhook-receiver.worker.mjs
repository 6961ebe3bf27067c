/*
 * The receiving end of bench/webhooks.bench.ts, in its own thread (plain JavaScript: Node 20 does not apply
 * the tsx loader to a worker's entry), so that answering webhooks does not compete with the server's event
 * loop. It answers at once, or after `slowMs` for the paths listed in `slowPaths`, and records for each request
 * its path, the event's `occurred_at` and the arrival time (both Date.now() milliseconds).
 *
 * Messages in: { type: "records", requestId } | { type: "count", requestId, paths } | { type: "close", requestId }
 * Messages out: { type: "ready", port } | { requestId, ...answer }
 */
import { createServer } from "node:http";
import { parentPort, workerData } from "node:worker_threads";

const slowPaths = new Set(workerData.slowPaths ?? []);
const slowMs = workerData.slowMs ?? 5_000;
/** @type {{ path: string, occurredAt: number, receivedAt: number }[]} */
const records = [];
const pending = new Set();

const server = createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    const receivedAt = Date.now();
    const path = request.url ?? "/";
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      records.push({ path, occurredAt: Date.parse(body.occurred_at), receivedAt });
    } catch {
      records.push({ path, occurredAt: Number.NaN, receivedAt });
    }
    const answer = () => {
      pending.delete(response);
      if (!response.destroyed) response.writeHead(200, { "content-type": "text/plain" }).end("ok");
    };
    if (slowPaths.has(path)) {
      pending.add(response);
      setTimeout(answer, slowMs);
    } else {
      answer();
    }
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => parentPort.postMessage({ type: "ready", port: server.address().port }));

parentPort.on("message", (message) => {
  if (message.type === "records") {
    parentPort.postMessage({ requestId: message.requestId, records });
  } else if (message.type === "count") {
    const paths = new Set(message.paths);
    parentPort.postMessage({
      requestId: message.requestId,
      count: records.filter((record) => paths.has(record.path)).length,
    });
  } else if (message.type === "close") {
    for (const response of pending) response.destroy();
    server.closeAllConnections();
    server.close(() => parentPort.postMessage({ requestId: message.requestId, closed: true }));
  }
});
