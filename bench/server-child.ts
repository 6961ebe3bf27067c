/*
 * The parent's side of a server under test running in a child process (bench/server-process.ts, or the
 * PostGraphile peer's bench/postgraphile/server.mjs): start it, learn its port, read its peak resident memory,
 * stop it. Peak RSS is Linux's VmHWM from /proc/<pid>/status; writing 5 to /proc/<pid>/clear_refs resets it,
 * so each part of the bench reports its own peak rather than the process's lifetime peak.
 */
import { fork, type ChildProcess } from "node:child_process";
import { closeSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export interface ServerChild {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  readonly pid: number;
  /** Starts a new peak-memory window (false where /proc does not allow it: the peak then spans the process). */
  resetPeak(): boolean;
  /** Peak resident set size since the last resetPeak (or the start), in MiB; NaN when /proc is unavailable. */
  peakRssMiB(): number;
  stop(): Promise<void>;
  /**
   * A reftrail server started with BENCH_STAGE_TIMINGS: each pipeline stage's passes and mean µs since the last
   * call (src/pipeline/stage-timings.ts).
   */
  takeStageTimings?(): Promise<{ stage: string; count: number; meanMicroseconds: number }[]>;
}

export interface ServerChildOptions {
  /** Extra environment for the child (on top of this process's). */
  readonly env?: Readonly<Record<string, string>>;
  /** Node flags; default `--import tsx` so that the child runs TypeScript. */
  readonly execArgv?: readonly string[];
  readonly cwd?: string;
  /** Where the child's stdout and stderr go (its logs): a file, appended to; default this process's own. */
  readonly logFile?: string;
}

/**
 * The Node flags of a reftrail server's process: `--import tsx`, and BENCH_SERVER_NODE_FLAGS, for a look inside it
 * that NODE_OPTIONS does not allow (`--trace-gc`: the heap left by each collection, which tells a leak from a
 * collector that simply runs less often; `--cpu-prof`).
 */
export function reftrailNodeFlags(): string[] {
  const flags = (process.env.BENCH_SERVER_NODE_FLAGS ?? "").split(" ").filter((flag) => flag !== "");
  return ["--import", "tsx", ...flags];
}

/** The reftrail server, with `env` overriding bench/bench-app.ts's production settings. */
export function startReftrailChild(databaseUrl: string, env: Readonly<Record<string, string>> = {}, logFile?: string) {
  return startServerChild(join(import.meta.dirname, "server-process.ts"), ["reftrail", databaseUrl], {
    env: { BENCH_SERVER_ENV: JSON.stringify(env) },
    execArgv: reftrailNodeFlags(),
    ...(logFile !== undefined && { logFile }),
  });
}

/** Apollo Server hello (POST /graphql) and Fastify hello (GET /hello) on one port. */
export function startAnchorsChild() {
  return startServerChild(join(import.meta.dirname, "server-process.ts"), ["anchors"]);
}

const START_TIMEOUT_MS = 120_000;

export async function startServerChild(
  entry: string,
  args: readonly string[],
  options: ServerChildOptions = {},
): Promise<ServerChild> {
  const log = options.logFile === undefined ? "inherit" : openSync(options.logFile, "a");
  const child: ChildProcess = fork(entry, [...args], {
    execArgv: [...(options.execArgv ?? ["--import", "tsx"])],
    env: { ...process.env, NODE_ENV: "production", ...options.env },
    cwd: options.cwd,
    stdio: ["ignore", log, log, "ipc"],
  });
  if (typeof log === "number") closeSync(log);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${entry} did not start in time`)), START_TIMEOUT_MS);
    child.once("message", (message: { port?: number }) => {
      clearTimeout(timer);
      if (typeof message.port === "number") resolve(message.port);
      else reject(new Error(`${entry} sent ${JSON.stringify(message)}`));
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${entry} ${args.join(" ")} exited with code ${code} before listening`));
    });
  });
  const pid = child.pid!;
  return {
    url: `http://127.0.0.1:${port}`,
    pid,
    resetPeak: () => {
      try {
        writeFileSync(`/proc/${pid}/clear_refs`, "5");
        return true;
      } catch {
        return false;
      }
    },
    peakRssMiB: () => {
      try {
        const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
        return match ? Number(match[1]) / 1024 : Number.NaN;
      } catch {
        return Number.NaN;
      }
    },
    takeStageTimings: () =>
      new Promise((resolve) => {
        child.once("message", (message: { stages?: { stage: string; count: number; meanMicroseconds: number }[] }) =>
          resolve(message.stages ?? []),
        );
        child.send("stages");
      }),
    stop: async () => {
      if (child.exitCode !== null) return;
      child.send("stop");
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
