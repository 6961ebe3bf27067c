/*
 * The worker half of load.ts (plain JavaScript: Node 20 does not apply the tsx loader to a worker's entry):
 * runs autocannon loads one at a time and posts each LoadResult back. Latencies come from autocannon's per-response event
 * (float milliseconds, from hrtime) because its own histogram only records whole milliseconds.
 */
import { parentPort } from "node:worker_threads";
import autocannon from "autocannon";

/** @param {Float64Array} sorted @param {number} q */
function percentile(sorted, q) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

async function main(spec) {
  /** @type {number[]} */
  const latencies = [];
  let non2xx = 0;
  const result = await new Promise((resolve, reject) => {
    const instance = autocannon(
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
                return { ...request, path: variant.path, body: variant.body };
              },
            },
          ],
        }),
        ...(spec.amount !== undefined ? { amount: spec.amount } : { duration: spec.durationSeconds ?? 10 }),
        timeout: 30,
      },
      (error, result) => (error ? reject(error) : resolve(result)),
    );
    instance.on("response", (_client, statusCode, _bytes, responseTime) => {
      if (statusCode >= 200 && statusCode < 300) latencies.push(responseTime);
      else non2xx += 1;
    });
  });
  const sorted = Float64Array.from(latencies).sort();
  return {
    rps: sorted.length / result.duration,
    requests: sorted.length + non2xx,
    non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    seconds: result.duration,
    p50: percentile(sorted, 0.5),
    p90: percentile(sorted, 0.9),
    p99: percentile(sorted, 0.99),
    max: sorted.length ? sorted[sorted.length - 1] : Number.NaN,
    mean: sorted.length ? sorted.reduce((a, b) => a + b, 0) / sorted.length : Number.NaN,
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
