/*
 * What one feature costs a GraphQL request, in CPU time rather than throughput (issue 37): throughput on a shared
 * 2-core machine moves with whatever else runs, while the CPU time a server spends per request it answered moves
 * much less. One server per variant on one seeded database, measured in turns, round after round, each round
 * starting one variant later than the one before (so that no variant always follows the same one):
 *   default     as bench/bench-app.ts builds it: budget charged, traces off
 *   budget-off  built without its cost budget (BENCH_BUDGET=off): nothing charged, settled or published
 *   traces-on   every span recorded, batched into the SDK's in-memory exporter (BENCH_TRACING=memory)
 *   traces-ctx  traces on with OTEL_TRACES_SAMPLER=always_off: the context carried across every await, no span
 * Per run: req/s, the server process's CPU µs per request (user + system, /proc/<pid>/stat; its main thread's in
 * parentheses) and, on PostgreSQL,
 * the CPU µs per request of the database's backends serving the bench database (every server's: the idle ones
 * cost next to nothing, with the webhook worker off). Prints each run, then per variant the median of the rounds
 * after the first (which warms the JIT) and the overall figure of those rounds (CPU summed ÷ requests summed), each
 * with its change against `default`; last, per variant, the median of its ratios to `default` taken within each
 * round (the variants of a round run back to back), the figure that cancels the machine's drift between rounds.
 *
 *   node --import tsx bench/variant-cost.ts [sqlite|postgres] [rounds=6] [seconds=4] [reference|graphqlPage]
 *     [variants=default,budget-off,traces-on]
 * A variant named twice runs on two servers whose rounds are pooled: one server's JIT luck then weighs half.
 * BENCH_SERVER_NODE_FLAGS adds Node flags to every server, as for the bench's own (bench/server-child.ts):
 * `--cpu-prof --cpu-prof-dir=<dir>` writes each server's CPU profile when it stops.
 */
import "./production-env.ts";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { LoadGenerator } from "./load.ts";
import { prepareDatabase, readSpecs } from "./data-path.bench.ts";
import { reftrailNodeFlags, startServerChild } from "./server-child.ts";
import { BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";

const VARIANTS: Record<string, { server: Record<string, string>; process?: Record<string, string> }> = {
  default: { server: {} },
  "budget-off": { server: { BENCH_BUDGET: "off" } },
  "traces-on": { server: { BENCH_TRACING: "memory" } },
  "traces-ctx": { server: { BENCH_TRACING: "memory" }, process: { OTEL_TRACES_SAMPLER: "always_off" } },
};

/** User + system CPU time of a process, in µs (Linux: /proc/<pid>/stat, in clock ticks of 10 ms); 0 once it ended. */
function cpuMicros(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return 0;
  }
}

/** The same for the process's main thread alone (its JavaScript; the collector's helpers and workers are apart). */
function mainThreadMicros(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/task/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return 0;
  }
}

/** The CPU time of the backends connected to `databaseName`, by pid (PostgreSQL on this machine only). */
async function backendCpu(admin: pg.Client, databaseName: string): Promise<Map<number, number>> {
  const { rows } = await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = $1", [
    databaseName,
  ]);
  return new Map(rows.map(({ pid }) => [pid, cpuMicros(pid)]));
}

const median = (values: readonly number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

const kind = (process.argv[2] ?? "postgres") as "sqlite" | "postgres";
const rounds = Number(process.argv[3] ?? 6);
const seconds = Number(process.argv[4] ?? 4);
const key = (process.argv[5] ?? "reference") as "reference" | "graphqlPage";
const names = (process.argv[6] ?? "default,budget-off,traces-on").split(",");
for (const name of names) if (!VARIANTS[name]) throw new Error(`unknown variant ${name}`);

const loads = new LoadGenerator();
const { database, apiKey, seeded } = await prepareDatabase(kind, 2000, { tags: 50, eventsPerReference: 20 });
const adminUrl = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";
const admin = kind === "postgres" ? new pg.Client({ connectionString: adminUrl }) : null;
await admin?.connect();
const databaseName = new URL(database.url).pathname.slice(1);
const servers = [];
for (const name of names) {
  const variant = VARIANTS[name]!;
  const child = await startServerChild(join(import.meta.dirname, "server-process.ts"), ["reftrail", database.url], {
    env: {
      BENCH_SERVER_ENV: JSON.stringify({
        WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY,
        WEBHOOK_WORKER: "off",
        ...variant.server,
      }),
      ...variant.process,
    },
    execArgv: reftrailNodeFlags(),
  });
  servers.push({ name, child, specs: await readSpecs(child.url, apiKey, seeded) });
}
console.log(`${kind} ${key}, ${rounds} rounds of ${seconds} s per variant; load average ${loadavg().join(" ")}`);
const figures = new Map<string, { rps: number[]; server: number[]; database: number[] }>();
/** Per variant over the rounds after the first: CPU µs (server, database) and requests, for the overall figure. */
const totals = new Map<string, { server: number; database: number; requests: number }>();
/** Each round's runs by variant (rounds after the first), for the figures paired within a round. */
const roundFigures: Map<string, { rps: number; server: number }[]>[] = [];
for (let round = 0; round < rounds; round++) {
  for (let turn = 0; turn < servers.length; turn++) {
    const { name, child, specs } = servers[(round + turn) % servers.length]!;
    const serverBefore = cpuMicros(child.pid);
    const mainBefore = mainThreadMicros(child.pid);
    const databaseBefore = admin ? await backendCpu(admin, databaseName) : new Map<number, number>();
    const result = await loads.run({ ...specs[key], connections: 50, durationSeconds: seconds, warmupSeconds: 0 });
    const server = Math.round((cpuMicros(child.pid) - serverBefore) / result.requests);
    const mainThread = Math.round((mainThreadMicros(child.pid) - mainBefore) / result.requests);
    let databaseMicros = 0;
    if (admin) {
      for (const [pid, micros] of await backendCpu(admin, databaseName))
        databaseMicros += micros - (databaseBefore.get(pid) ?? 0);
    }
    const databasePerRequest = Math.round(databaseMicros / result.requests);
    if (round > 0) {
      const total = totals.get(name) ?? { server: 0, database: 0, requests: 0 };
      total.server += server * result.requests;
      total.database += databaseMicros;
      total.requests += result.requests;
      totals.set(name, total);
      const entry = figures.get(name) ?? { rps: [], server: [], database: [] };
      entry.rps.push(result.rps);
      entry.server.push(server);
      entry.database.push(databasePerRequest);
      figures.set(name, entry);
      const thisRound = roundFigures[round] ?? (roundFigures[round] = new Map());
      const runs = thisRound.get(name) ?? [];
      runs.push({ rps: result.rps, server });
      thisRound.set(name, runs);
    }
    console.log(
      `round ${round + 1} ${name}: ${Math.round(result.rps)} req/s, server ${server} µs/req (main ${mainThread})` +
        (admin ? `, database ${databasePerRequest} µs/req` : "") +
        `, load ${loadavg()[0]!.toFixed(2)}`,
    );
  }
}
const base = figures.get("default");
const change = (value: number, reference: number | undefined) =>
  reference ? ` (${value >= reference ? "+" : ""}${(((value - reference) / reference) * 100).toFixed(1)} %)` : "";
for (const [name, entry] of figures) {
  const server = median(entry.server);
  const total = median(entry.server.map((micros, index) => micros + entry.database[index]!));
  const baseTotal = base ? median(base.server.map((micros, index) => micros + base.database[index]!)) : undefined;
  console.log(
    `median ${name}: ${Math.round(median(entry.rps))} req/s, server ${server} µs/req${change(server, base && median(base.server))}` +
      (admin ? `, server + database ${total} µs/req${change(total, baseTotal)}` : ""),
  );
}
// The overall figure weighs each run by its requests: a run the machine starved answers few requests, each carrying
// more of the server's fixed background work, and moves a median of per-run figures more than it should.
const baseTotal = totals.get("default");
for (const [name, total] of totals) {
  const server = Math.round(total.server / total.requests);
  const both = Math.round((total.server + total.database) / total.requests);
  console.log(
    `overall ${name}: server ${server} µs/req` +
      change(server, baseTotal && baseTotal.server / baseTotal.requests) +
      (admin
        ? `, server + database ${both} µs/req` +
          change(both, baseTotal && (baseTotal.server + baseTotal.database) / baseTotal.requests)
        : ""),
  );
}
// Paired within each round: the variants of one round run within a minute of each other, so a ratio taken there
// cancels the machine's drift between rounds (on a shared machine the same server's CPU per request can move by a
// third from one round to the next). The median of the rounds' ratios, and their range.
const mean = (values: readonly number[]) => values.reduce((sum, value) => sum + value, 0) / values.length;
const percent = (ratio: number) => `${ratio >= 1 ? "+" : ""}${((ratio - 1) * 100).toFixed(1)} %`;
for (const name of new Set(names)) {
  if (name === "default") continue;
  const rps: number[] = [];
  const server: number[] = [];
  for (const round of roundFigures) {
    const variant = round?.get(name);
    const reference = round?.get("default");
    if (!variant || !reference) continue;
    rps.push(mean(variant.map((run) => run.rps)) / mean(reference.map((run) => run.rps)));
    server.push(mean(variant.map((run) => run.server)) / mean(reference.map((run) => run.server)));
  }
  if (rps.length === 0) continue;
  const range = (ratios: number[]) => `${percent(Math.min(...ratios))} to ${percent(Math.max(...ratios))}`;
  console.log(
    `paired ${name} against default, ${rps.length} rounds: req/s ${percent(median(rps))} (${range(rps)}), ` +
      `server CPU ${percent(median(server))} (${range(server)})`,
  );
}
console.log(`load average at the end ${loadavg().join(" ")}`);
for (const { child } of servers) await child.stop();
await admin?.end();
await loads.close();
await database.drop();
process.exit(0);
