import { buildApp, type App } from "../src/app.ts";
import type { StageTimings } from "../src/pipeline/stage-timings.ts";
import { loadConfig } from "../src/config.ts";
import { openDatabase } from "../src/store/database.ts";
import { BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";
import type { ExportResult } from "@opentelemetry/core";
import { InMemorySpanExporter, type ReadableSpan } from "@opentelemetry/sdk-trace-base";

/**
 * The server under test, in the bench's own process, set up as in production (NODE_ENV=production, a throwaway
 * key for signing secrets at rest, no request logs, no rate limit, a cost budget too large to refuse anything —
 * every request is still charged, so its cost is measured; the settings in PASSED_THROUGH taken from
 * this process's environment, to compare them) on the database at `url`; `env` adds or
 * overrides settings. Not listening yet: each part chooses how.
 *
 * Two variants, for the rows that take a feature's cost apart (bench/data-path.bench.ts, bench/variant-cost.ts):
 * BENCH_TRACING=memory turns traces on; BENCH_BUDGET=off builds the server without its cost budget (src/app.ts,
 * `withoutCostBudget`: nothing charged, settled or published), the difference being the budget's whole cost.
 */
export async function startBenchApp(
  url: string,
  env: Readonly<Record<string, string>> = {},
  stageTimings?: StageTimings,
): Promise<App> {
  // BENCH_DEFAULTS=production (the soak): the server's own defaults for logs, the per-minute limit and budgets.
  const measuringOnly =
    env.BENCH_DEFAULTS === "production"
      ? {}
      : {
          LOG_LEVEL: "silent",
          RATE_LIMIT_PER_MINUTE: "off",
          COST_BUDGET_MAXIMUM: "1e12",
          COST_BUDGET_RESTORE_RATE: "1e12",
        };
  const config = loadConfig({
    NODE_ENV: "production",
    WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY,
    ...measuringOnly,
    DATABASE_URL: url,
    ...passedThrough(),
    ...env,
  });
  const database = await openDatabase(url, { sqliteReadThread: config.sqliteReadThread });
  // BENCH_TRACING=memory: traces on, batched as to a collector, into an in-memory exporter (bench/data-path.bench.ts).
  const spans = env.BENCH_TRACING === "memory" ? { exporter: new ForgetfulSpanExporter(), batched: true } : undefined;
  return buildApp({ config, database, spans, withoutCostBudget: env.BENCH_BUDGET === "off", stageTimings });
}

/** The SDK's in-memory exporter, emptied after every export: a load of many minutes keeps no spans. */
class ForgetfulSpanExporter extends InMemorySpanExporter {
  override export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    super.export(spans, resultCallback);
    this.reset();
  }
}

/** Settings a bench run may set in its environment to compare values: the rest are the production defaults. */
const PASSED_THROUGH = [
  "SQLITE_READ_THREAD",
  "READS_PER_TURN",
  "READ_TURN_TARGET",
  "MAX_READS_IN_FLIGHT",
  "WEBHOOK_WORKER",
  "COST_BUDGET_MAXIMUM",
  "COST_BUDGET_RESTORE_RATE",
] as const;

function passedThrough(): Record<string, string> {
  return Object.fromEntries(
    PASSED_THROUGH.flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name]!]])),
  );
}
