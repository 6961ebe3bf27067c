/*
 * The worker half of load.ts (plain JavaScript: Node 20 does not apply the tsx loader to a worker's entry):
 * runs autocannon loads one at a time and posts each LoadResult back. Latencies come from autocannon's per-response event
 * (float milliseconds, from hrtime) because its own histogram only records whole milliseconds.
 *
 * With `warmupSeconds`, the warm-up runs on the very connections that are then measured, and measuring starts
 * only once every connection has had a response. A busy Node server accepts one new connection per event-loop
 * turn (libuv), and a turn runs every request that is ready, so 50 connections opened at once against a server
 * spending 5 ms per request are all accepted only after seconds: the last ones' first requests wait that long,
 * and in a 5-second run some are never served. Those waits are the cost of opening connections under load, not
 * of serving requests; they are reported apart (`rampSeconds`) instead of being mixed into the percentiles.
 */
import { parentPort } from "node:worker_threads";
import autocannon from "autocannon";

/** @param {Float64Array} sorted @param {number} q */
function percentile(sorted, q) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** How long connections may take to be all served once before a timed run gives up waiting and measures anyway. */
const MAX_RAMP_SECONDS = 60;

async function main(spec) {
  /** @type {number[]} */
  const latencies = [];
  let non2xx = 0;
  /** Per connection (autocannon's client object): its 2xx latencies, to see whether some connections starve. */
  const byConnection = new Map();
  const answered = new Set();
  const timed = spec.amount === undefined;
  const steady = timed && spec.warmupSeconds !== undefined;
  const durationMs = (spec.durationSeconds ?? 10) * 1000;
  const started = performance.now();
  // Without a warm-up on the same connections, every response counts (the window is autocannon's whole run).
  let windowStart = steady ? Number.POSITIVE_INFINITY : 0;
  let windowEnd = Number.POSITIVE_INFINITY;
  let rampMs = Number.NaN;
  let instance;
  const result = await new Promise((resolve, reject) => {
    instance = autocannon(
      {
        url: spec.url,
        method: spec.method ?? "GET",
        headers: spec.headers,
        body: spec.body,
        connections: spec.connections,
        ...(spec.variants && {
          requests: [
            {
              setupRequest: (request) => {
                const variant = spec.variants[Math.floor(Math.random() * spec.variants.length)];
                return {
                  ...request,
                  path: variant.path,
                  body: variant.body,
                  ...(variant.headers && { headers: { ...spec.headers, ...variant.headers } }),
                };
              },
            },
          ],
        }),
        ...(timed
          ? { duration: steady ? MAX_RAMP_SECONDS + spec.warmupSeconds + durationMs / 1000 + 1 : durationMs / 1000 }
          : { amount: spec.amount }),
        timeout: 30,
      },
      (error, result) => (error ? reject(error) : resolve(result)),
    );
    const startWindow = () => {
      windowStart = performance.now() + spec.warmupSeconds * 1000;
      windowEnd = windowStart + durationMs;
      setTimeout(() => instance.stop(), windowEnd - performance.now());
    };
    if (steady) setTimeout(() => windowStart === Number.POSITIVE_INFINITY && startWindow(), MAX_RAMP_SECONDS * 1000);
    instance.on("response", (client, statusCode, _bytes, responseTime) => {
      const now = performance.now();
      if (steady && Number.isNaN(rampMs) && !answered.has(client)) {
        answered.add(client);
        if (answered.size === spec.connections) {
          rampMs = now - started;
          startWindow();
        }
      }
      // A response counts when its request was sent inside the window and it arrived before the window closed.
      if (now - responseTime < windowStart || now > windowEnd) return;
      if (statusCode >= 200 && statusCode < 300) {
        latencies.push(responseTime);
        if (spec.perConnection) {
          let own = byConnection.get(client);
          if (!own) byConnection.set(client, (own = []));
          own.push(responseTime);
        }
      } else non2xx += 1;
    });
  });
  const sorted = Float64Array.from(latencies).sort();
  const seconds = steady ? durationMs / 1000 : result.duration;
  return {
    rps: sorted.length / seconds,
    requests: sorted.length + non2xx,
    non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    seconds,
    ...(steady && { rampSeconds: rampMs / 1000 }),
    p50: percentile(sorted, 0.5),
    p90: percentile(sorted, 0.9),
    p99: percentile(sorted, 0.99),
    max: sorted.length ? sorted[sorted.length - 1] : Number.NaN,
    mean: sorted.length ? sorted.reduce((a, b) => a + b, 0) / sorted.length : Number.NaN,
    ...(spec.perConnection && {
      perConnection: [...byConnection.values()].map((own) => {
        const mine = Float64Array.from(own).sort();
        return { requests: mine.length, p50: percentile(mine, 0.5), p99: percentile(mine, 0.99), max: mine.at(-1) };
      }),
    }),
  };
}

// One load at a time, as the parent asks: { id, spec } in, { id, result } or { id, error } out.
parentPort.on("message", ({ id, spec }) => {
  main(spec).then(
    (result) => parentPort.postMessage({ id, result }),
    (error) =>
      parentPort.postMessage({ id, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
  );
});
