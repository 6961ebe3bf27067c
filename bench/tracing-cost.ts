/*
 * What traces cost a GraphQL request, in server CPU time rather than throughput (issue 37): throughput on a
 * shared 2-core machine moves with whatever else runs, while the CPU time a server process spends per request
 * it answered moves much less. Three servers on one seeded database, measured in turns, round after round:
 * `off` (the default), `ctx` (traces on with OTEL_TRACES_SAMPLER=always_off: the context is carried across
 * every await, no span is recorded) and `on` (every span recorded, batched into the SDK's in-memory exporter).
 * Prints each run and the median of the rounds after the first (which warms the JIT).
 *
 *   node --import tsx bench/tracing-cost.ts [sqlite|postgres] [rounds=8] [seconds=4] [reference|graphqlPage]
 */
import "./production-env.ts";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { LoadGenerator } from "./load.ts";
import { prepareDatabase, readSpecs } from "./data-path.bench.ts";
import { startServerChild } from "./server-child.ts";
import { BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";

/** User + system CPU time of a process, in ms (Linux: /proc/<pid>/stat, in clock ticks of 10 ms). */
const cpuMs = (pid: number) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
};
const kind = (process.argv[2] ?? "postgres") as "sqlite" | "postgres";
const rounds = Number(process.argv[3] ?? 3);
const seconds = Number(process.argv[4] ?? 5);
const key = (process.argv[5] ?? "reference") as "reference" | "graphqlPage";
const loads = new LoadGenerator();
const { database, apiKey, seeded } = await prepareDatabase(kind, 2000, { tags: 50, eventsPerReference: 20 });
const variants = {
  off: {},
  ctx: { BENCH_TRACING: "memory", OTEL_TRACES_SAMPLER: "always_off" },
  on: { BENCH_TRACING: "memory" },
} as const;
const children = [];
for (const [name, extra] of Object.entries(variants)) {
  const { OTEL_TRACES_SAMPLER, ...serverEnv } = extra as Record<string, string>;
  const child = await startServerChild(join(import.meta.dirname, "server-process.ts"), ["reftrail", database.url], {
    env: {
      BENCH_SERVER_ENV: JSON.stringify({ WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY, ...serverEnv }),
      ...(OTEL_TRACES_SAMPLER ? { OTEL_TRACES_SAMPLER } : {}),
    },
  });
  children.push({ name, child, specs: await readSpecs(child.url, apiKey, seeded) });
}
const totals: Record<string, number[]> = {};
for (let i = 0; i < rounds; i++) {
  for (const { name, child, specs } of children) {
    const before = cpuMs(child.pid);
    const r = await loads.run({ ...specs[key], connections: 50, durationSeconds: seconds, warmupSeconds: 0 });
    const perRequest = Math.round(((cpuMs(child.pid) - before) * 1000) / r.requests);
    if (i > 0) (totals[name] ??= []).push(perRequest);
    console.log(kind, key, name, Math.round(r.rps), "cpu µs/req", perRequest);
  }
}
for (const [name, values] of Object.entries(totals)) {
  values.sort((a, b) => a - b);
  console.log("median", name, values[Math.floor(values.length / 2)]);
}
for (const { child } of children) await child.stop();
await loads.close();
await database.drop();
process.exit(0);
