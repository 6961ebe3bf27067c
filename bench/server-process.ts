/*
 * A server under test in a process of its own (started by bench/server-child.ts), so that neither the load
 * generator nor the bench's bookkeeping shares its event loop or its memory: the parent reads this process's
 * peak RSS from /proc.
 *
 *   node --import tsx bench/server-process.ts reftrail <database url>   the real server (bench/bench-app.ts)
 *   node --import tsx bench/server-process.ts anchors                   Apollo and Fastify hello (baseline.ts)
 *
 * Settings for the reftrail server arrive as JSON in BENCH_SERVER_ENV (they override bench-app.ts's). Tells
 * its parent `{ port }` over the IPC channel once listening; closes and exits on the message "stop".
 */
import "./production-env.ts";
import { startBaseline } from "./baseline.ts";
import { startBenchApp } from "./bench-app.ts";
import { StageTimings } from "../src/pipeline/stage-timings.ts";

const [role, url] = process.argv.slice(2);

/** With BENCH_STAGE_TIMINGS=1 in BENCH_SERVER_ENV: what each pipeline stage costs (bench/baseline-ref.bench.ts). */
let stageTimings: StageTimings | undefined;

async function start(): Promise<{ port: number; close(): Promise<void> }> {
  if (role === "anchors") {
    const baseline = await startBaseline();
    return { port: Number(new URL(baseline.url).port), close: () => baseline.close() };
  }
  if (role !== "reftrail" || !url) throw new Error(`usage: server-process.ts reftrail <url> | anchors`);
  const { BENCH_STAGE_TIMINGS: timed, ...env } = JSON.parse(process.env.BENCH_SERVER_ENV ?? "{}") as Record<
    string,
    string
  >;
  if (timed === "1") stageTimings = new StageTimings();
  const app = await startBenchApp(url, env, stageTimings);
  await app.http.listen({ host: "127.0.0.1", port: 0 });
  const address = app.http.server.address();
  if (!address || typeof address === "string") throw new Error("server did not bind a TCP port");
  return { port: address.port, close: () => app.close() };
}

const server = await start();
process.on("message", (message) => {
  if (message === "stages") {
    process.send!({ stages: stageTimings?.take() ?? [] });
    return;
  }
  if (message !== "stop") return;
  server.close().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
});
process.send!({ port: server.port });
