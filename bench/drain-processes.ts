/*
 * The processes of bench/webhooks-drain.bench.ts and what it reads of them: a fresh database, the organization made
 * with the command, the server as `node dist/main.js` with an operator's environment, the receiver
 * (bench/drain-receiver.mjs), and a process's CPU time from /proc.
 */
import { execFile, fork, spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import pg from "pg";

export type Kind = "sqlite" | "postgres";

const ROOT = join(import.meta.dirname, "..");
/** The receiver verifies the signature of every this-many-th request. */
const VERIFY_EVERY = 100;
const DRAIN_TIMEOUT_MS = 600_000;

// ---------------------------------------------------------------------------------------------------------------
// CPU time of a process, from /proc

const CLOCK_TICKS = Number(spawnSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).stdout.trim()) || 100;

/** User + system CPU of a process (all its threads) so far, in microseconds. */
export function cpuMicros(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces), from field 3 (state): utime is 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return ((Number(fields[11]) + Number(fields[12])) * 1_000_000) / CLOCK_TICKS;
}

// ---------------------------------------------------------------------------------------------------------------
// The database, the server and the receiver

export interface Database {
  readonly url: string;
  drop(): Promise<void>;
}

/** An empty database: the command migrates it. */
export async function freshDatabase(kind: Kind, adminUrl: string): Promise<Database> {
  if (kind === "sqlite") {
    const folder = mkdtempSync(join(tmpdir(), "reftrail-bench-drain-"));
    return { url: `file:${join(folder, "reftrail.db")}`, drop: async () => rmSync(folder, { recursive: true }) };
  }
  const name = `reftrail_bench_${randomBytes(6).toString("hex")}`;
  const admin = async (sql: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await admin(`CREATE DATABASE "${name}"`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => admin(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`) };
}

export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** An operator's environment for the server and the command: the settings, and nothing else of this process's. */
export function operatorEnvironment(databaseUrl: string, port: number): NodeJS.ProcessEnv {
  const kept = Object.fromEntries(
    ["PATH", "HOME", "TMPDIR", "LANG", "TZ"].flatMap((name) => (process.env[name] ? [[name, process.env[name]]] : [])),
  );
  return {
    ...kept,
    NODE_ENV: "production",
    DATABASE_URL: databaseUrl,
    WEBHOOK_SECRET_KEY: randomBytes(32).toString("base64"),
    LOG_LEVEL: "silent",
    HOST: "127.0.0.1",
    PORT: String(port),
    WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
  };
}

export async function createOrganization(env: NodeJS.ProcessEnv): Promise<string> {
  const { stdout } = await promisify(execFile)(process.execPath, ["bin/reftrail.mjs", "org", "create", "drain"], {
    cwd: ROOT,
    env,
  });
  return (JSON.parse(stdout) as { api_key: string }).api_key;
}

export interface RunningServer {
  readonly origin: string;
  readonly pid: number;
  /** performance.now() when the process was spawned: a profile's clock starts about then. */
  readonly spawnedAt: number;
  stop(): Promise<void>;
}

export async function startServer(env: NodeJS.ProcessEnv, nodeArgs: readonly string[]): Promise<RunningServer> {
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, [...nodeArgs, "dist/main.js"], {
    cwd: ROOT,
    env,
    stdio: ["ignore", "ignore", "inherit"],
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
  const origin = `http://127.0.0.1:${env.PORT}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`node dist/main.js exited with code ${child.exitCode}`);
    const ready = await fetch(`${origin}/readyz`).then(
      (response) => response.ok,
      () => false,
    );
    if (ready) break;
    if (Date.now() > deadline) throw new Error("node dist/main.js was not ready within 2 minutes");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    origin,
    pid: child.pid!,
    spawnedAt,
    stop: async () => {
      if (child.exitCode !== null) return;
      const kill = setTimeout(() => child.kill("SIGKILL"), 30_000);
      child.kill("SIGTERM");
      await exited;
      clearTimeout(kill);
    },
  };
}

/** The parent's side of bench/drain-receiver.mjs. */
export class Receiver {
  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
  ) {}

  static async start(): Promise<Receiver> {
    const child = fork(join(import.meta.dirname, "drain-receiver.mjs"), [], {
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    const { port } = await Receiver.next<{ port: number }>(child, "ready");
    return new Receiver(child, `http://127.0.0.1:${port}/drain`);
  }

  private static next<T>(child: ChildProcess, type: string): Promise<T> {
    return new Promise((resolve, reject) => {
      const onExit = () => reject(new Error("the receiver exited"));
      const onMessage = (message: { type: string }) => {
        if (message.type !== type) return;
        child.off("message", onMessage);
        child.off("exit", onExit);
        resolve(message as T);
      };
      child.on("message", onMessage);
      child.once("exit", onExit);
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  verifyWith(secret: string): void {
    this.child.send({ type: "verify", secret, verifyEvery: VERIFY_EVERY });
  }

  async mark(): Promise<number> {
    const marked = Receiver.next<{ arrivals: number }>(this.child, "marked");
    this.child.send({ type: "mark" });
    return (await marked).arrivals;
  }

  /** Resolves once `total` distinct deliveries have arrived. */
  async reached(total: number) {
    const reached = Receiver.next<ReceiverSummary>(this.child, "reached");
    this.child.send({ type: "await", total });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`fewer than ${total} deliveries arrived in 10 minutes`)),
        DRAIN_TIMEOUT_MS,
      );
    });
    try {
      return await Promise.race([reached, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    const closed = Receiver.next(this.child, "closed");
    this.child.send({ type: "close" });
    await closed;
  }
}

export interface ReceiverSummary {
  readonly arrivals: number;
  readonly distinct: number;
  readonly duplicates: number;
  readonly verified: number;
  readonly badSignatures: number;
  readonly sinceMark: number;
  /** First to last arrival after the mark. */
  readonly drainMs: number;
}
