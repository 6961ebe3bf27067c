/*
 * The webhook receivers of bench/soak.ts, in a worker thread (plain JavaScript, as webhook-receiver.worker.mjs) so
 * that answering webhooks does not compete with the server's event loop. One HTTP server, one path per endpoint.
 * A path given `failRatio` answers that share of its requests 500 (at random); every other request is answered 200.
 *
 * For each path it keeps, per event id (the body's `id`), how many times the event was answered 200: a second 200
 * is a duplicate (a 500 is a failed attempt, and the retry that follows is not one). Per report interval it keeps
 * the latency of each event's first 200, from the event's `occurred_at` to the arrival. On a path marked `ordered`
 * it checks that each reference's events are first answered in the log's order, (occurred_at, id).
 *
 * Messages in: { type: "interval" } | { type: "status" } | { type: "check", path, expected: eventId[] }
 *            | { type: "close" }, each with a requestId
 * Messages out: { type: "ready", port } | { requestId, ...answer }
 */
import { createServer } from "node:http";
import { parentPort, workerData } from "node:worker_threads";

/** @type {Record<string, { failRatio?: number, ordered?: boolean }>} */
const paths = workerData.paths;

/** @param {Float64Array} sorted @param {number} q */
function percentile(sorted, q) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

const freshInterval = () => ({ requests: 0, failedOnPurpose: 0, firsts: [] });

const state = Object.fromEntries(
  Object.keys(paths).map((path) => [
    path,
    {
      /** @type {Map<string, number>} event id → 200 answers */
      answered: new Map(),
      duplicates: 0,
      outOfOrder: 0,
      /** @type {Map<string, { at: number, id: string }>} reference → last event first answered */
      lastByReference: new Map(),
      interval: freshInterval(),
    },
  ]),
);

/** Whether (at, id) comes before (other.at, other.id) in a reference's log. */
const before = (at, id, other) => at < other.at || (at === other.at && id < other.id);

const server = createServer((request, response) => {
  const chunks = [];
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    const receivedAt = Date.now();
    const own = state[request.url ?? ""];
    if (!own) return void response.writeHead(404).end();
    own.interval.requests += 1;
    if (Math.random() < (paths[request.url].failRatio ?? 0)) {
      own.interval.failedOnPurpose += 1;
      return void response.writeHead(500, { "content-type": "text/plain" }).end("failing on purpose");
    }
    response.writeHead(200, { "content-type": "text/plain" }).end("ok");
    let body;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      return;
    }
    const count = own.answered.get(body.id) ?? 0;
    own.answered.set(body.id, count + 1);
    if (count > 0) {
      own.duplicates += 1;
      return;
    }
    const occurredAt = Date.parse(body.occurred_at);
    own.interval.firsts.push(receivedAt - occurredAt);
    if (paths[request.url].ordered) {
      const last = own.lastByReference.get(body.reference_id);
      if (last && before(occurredAt, body.id, last)) own.outOfOrder += 1;
      else own.lastByReference.set(body.reference_id, { at: occurredAt, id: body.id });
    }
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, "127.0.0.1", () => parentPort.postMessage({ type: "ready", port: server.address().port }));

/** Per path, and under "steady" every path that never fails on purpose together (retries would hide its tail). */
function takeInterval() {
  const steady = freshInterval();
  const taken = Object.entries(state).map(([path, own]) => {
    const interval = own.interval;
    own.interval = freshInterval();
    if (!paths[path].failRatio) {
      steady.requests += interval.requests;
      for (const latency of interval.firsts) steady.firsts.push(latency);
    }
    return [path, interval];
  });
  return Object.fromEntries(
    [...taken, ["steady", steady]].map(([path, { requests, failedOnPurpose, firsts }]) => {
      const sorted = Float64Array.from(firsts).sort();
      const p = (q) => percentile(sorted, q);
      return [path, { requests, failedOnPurpose, firsts: sorted.length, p50: p(0.5), p99: p(0.99), max: p(1) }];
    }),
  );
}

function status() {
  return Object.fromEntries(
    Object.entries(state).map(([path, own]) => [
      path,
      { distinct: own.answered.size, duplicates: own.duplicates, outOfOrder: own.outOfOrder },
    ]),
  );
}

/** Expected events never answered 200, and events answered 200 that were not expected. */
function check(path, expected) {
  const own = state[path];
  const wanted = new Set(expected);
  const lost = expected.filter((id) => !own.answered.has(id));
  const unexpected = [...own.answered.keys()].filter((id) => !wanted.has(id));
  return { lost: lost.length, lostSample: lost.slice(0, 5), unexpected: unexpected.length };
}

parentPort.on("message", (message) => {
  const reply = (answer) => parentPort.postMessage({ requestId: message.requestId, ...answer });
  if (message.type === "interval") reply({ interval: takeInterval() });
  else if (message.type === "status") reply({ status: status() });
  else if (message.type === "check") reply({ check: check(message.path, message.expected) });
  else if (message.type === "close") {
    server.closeAllConnections();
    server.close(() => reply({ closed: true }));
  }
});
