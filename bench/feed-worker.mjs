/*
 * An open-loop write feed in a worker thread (plain JavaScript, as load-worker.mjs): POSTs at a fixed rate
 * whatever the server answers, each to a random path of the list, the way a tracking feed keeps sending while
 * the server is slow. A request's latency runs from its scheduled time to the end of its response, so time
 * spent waiting for a free connection counts (no coordinated omission). Messages: { start: spec } then
 * { stop: true }, answered with the stats of everything sent in between.
 */
import { parentPort } from "node:worker_threads";
import { Pool } from "undici";

/** @param {Float64Array} sorted @param {number} q */
function percentile(sorted, q) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

let running = null;

function start(spec) {
  const pool = new Pool(spec.origin, { connections: spec.connections ?? 128, pipelining: 1 });
  const latencies = [];
  const state = { sent: 0, ok: 0, non2xx: 0, errors: 0, stopped: false, inFlight: new Set() };
  const intervalMs = 1000 / spec.ratePerSecond;
  const startedAt = performance.now();
  const send = (scheduledAt) => {
    state.sent += 1;
    const path = spec.paths[Math.floor(Math.random() * spec.paths.length)];
    const request = pool
      .request({ path, method: "POST", headers: spec.headers, body: spec.body })
      .then(async ({ statusCode, body }) => {
        await body.dump();
        if (statusCode >= 200 && statusCode < 300) {
          state.ok += 1;
          latencies.push(performance.now() - scheduledAt);
        } else state.non2xx += 1;
      })
      .catch(() => (state.errors += 1))
      .finally(() => state.inFlight.delete(request));
    state.inFlight.add(request);
  };
  let next = 0;
  const tick = () => {
    if (state.stopped) return;
    // Every request whose time has come goes now: a late timer sends the backlog, the schedule never slips.
    while (startedAt + next * intervalMs <= performance.now()) send(startedAt + next++ * intervalMs);
    setTimeout(tick, Math.max(0, startedAt + next * intervalMs - performance.now()));
  };
  tick();
  return {
    async stop() {
      state.stopped = true;
      const seconds = (performance.now() - startedAt) / 1000;
      const answeredInRun = state.ok;
      await Promise.allSettled([...state.inFlight]);
      await pool.close();
      const sorted = Float64Array.from(latencies).sort();
      return {
        seconds,
        sent: state.sent,
        ok: state.ok,
        answeredInRun,
        non2xx: state.non2xx,
        errors: state.errors,
        p50: percentile(sorted, 0.5),
        p99: percentile(sorted, 0.99),
        max: sorted.length ? sorted[sorted.length - 1] : Number.NaN,
      };
    },
  };
}

parentPort.on("message", (message) => {
  if (message.start) {
    running = start(message.start);
    parentPort.postMessage({ started: true });
  } else if (message.stop) {
    const feed = running;
    running = null;
    feed.stop().then(
      (result) => parentPort.postMessage({ result }),
      (error) => parentPort.postMessage({ error: String(error) }),
    );
  }
});
