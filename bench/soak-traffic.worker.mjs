/*
 * Open-loop traffic for bench/soak.ts, in a worker thread (plain JavaScript, as feed-worker.mjs): requests at a fixed
 * rate whatever the server answers, each from a row picked by its share, then a variant of that row picked at
 * random (random keys). A request's latency runs from its scheduled time to the end of its response, so time spent
 * queued for a connection counts (no coordinated omission). Figures are kept per row and handed over, then reset,
 * at each `interval` message, so that an hour of traffic holds no more than one interval's latencies in memory.
 *
 * Messages in: { start: spec } | { interval: true } | { stop: true }
 * Messages out: { started: true } | { interval: { [row]: RowStats, all: RowStats } } (also the answer to stop, after
 * the requests in flight have ended).
 */
import { parentPort } from "node:worker_threads";
import { Pool } from "undici";

/** @param {Float64Array} sorted @param {number} q */
function percentile(sorted, q) {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

const freshRow = () => ({ sent: 0, ok: 0, latencies: [], statuses: {}, errors: 0, skipped: 0 });

let running = null;

function start(spec) {
  const pool = new Pool(spec.origin, {
    connections: spec.connections ?? 64,
    pipelining: 1,
    headersTimeout: 30_000,
    bodyTimeout: 30_000,
  });
  const totalShare = spec.rows.reduce((sum, row) => sum + row.share, 0);
  let rows = Object.fromEntries(spec.rows.map((row) => [row.name, freshRow()]));
  const inFlight = new Set();
  const maxInFlight = spec.maxInFlight ?? 5_000;
  let stopped = false;
  const pickRow = () => {
    let at = Math.random() * totalShare;
    for (const row of spec.rows) if ((at -= row.share) < 0) return row;
    return spec.rows[spec.rows.length - 1];
  };
  const send = (scheduledAt) => {
    const row = pickRow();
    const stats = rows[row.name];
    // A server that stalls must not make the client hold an unbounded queue: past the cap a request is skipped.
    if (inFlight.size >= maxInFlight) {
      stats.skipped += 1;
      return;
    }
    stats.sent += 1;
    const variant = row.variants[Math.floor(Math.random() * row.variants.length)];
    const request = pool
      .request({
        path: variant.path,
        method: row.method,
        headers: variant.headers ? { ...row.headers, ...variant.headers } : row.headers,
        body: variant.body,
      })
      .then(async ({ statusCode, body }) => {
        await body.dump();
        // Counted in the interval running when the answer arrives.
        const own = rows[row.name];
        own.statuses[statusCode] = (own.statuses[statusCode] ?? 0) + 1;
        if (statusCode >= 200 && statusCode < 300) {
          own.ok += 1;
          own.latencies.push(performance.now() - scheduledAt);
        }
      })
      .catch(() => (rows[row.name].errors += 1))
      .finally(() => inFlight.delete(request));
    inFlight.add(request);
  };
  const intervalMs = 1000 / spec.ratePerSecond;
  const startedAt = performance.now();
  let next = 0;
  const tick = () => {
    if (stopped) return;
    // Every request whose time has come goes now: a late timer sends the backlog, the schedule never slips.
    while (startedAt + next * intervalMs <= performance.now()) send(startedAt + next++ * intervalMs);
    setTimeout(tick, Math.max(0, startedAt + next * intervalMs - performance.now()));
  };
  tick();
  const takeInterval = () => {
    const taken = rows;
    rows = Object.fromEntries(spec.rows.map((row) => [row.name, freshRow()]));
    // Every row together too, under "all": its percentiles over all the rows' latencies.
    const all = freshRow();
    for (const stats of Object.values(taken)) {
      for (const key of ["sent", "ok", "errors", "skipped"]) all[key] += stats[key];
      for (const [status, n] of Object.entries(stats.statuses)) all.statuses[status] = (all.statuses[status] ?? 0) + n;
      for (const latency of stats.latencies) all.latencies.push(latency);
    }
    return Object.fromEntries(
      Object.entries({ ...taken, all }).map(([name, stats]) => {
        const sorted = Float64Array.from(stats.latencies).sort();
        const { latencies: _latencies, ...counts } = stats;
        const p = (q) => percentile(sorted, q);
        return [name, { ...counts, inFlight: inFlight.size, p50: p(0.5), p99: p(0.99), max: p(1) }];
      }),
    );
  };
  return {
    takeInterval,
    async stop() {
      stopped = true;
      await Promise.allSettled([...inFlight]);
      await pool.close();
      return takeInterval();
    },
  };
}

parentPort.on("message", (message) => {
  if (message.start) {
    running = start(message.start);
    parentPort.postMessage({ started: true });
  } else if (message.interval) {
    parentPort.postMessage({ interval: running.takeInterval() });
  } else if (message.stop) {
    running.stop().then(
      (interval) => parentPort.postMessage({ interval }),
      (error) => parentPort.postMessage({ error: String(error) }),
    );
  }
});
