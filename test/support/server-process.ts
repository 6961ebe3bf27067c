import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { TEST_WEBHOOK_SECRET_KEY } from "./test-server.ts";

/* The server as a real child process (`node --import tsx src/main.ts`), for tests that kill it. */

const ROOT = join(import.meta.dirname, "..", "..");

export interface ServerProcess {
  readonly child: ChildProcess;
  /** http://127.0.0.1:<port> */
  readonly url: string;
  output(): string;
  /** Resolves with the exit code (or signal) once the process has ended. */
  exited(): Promise<number | string | null>;
}

/** Starts the server on `DATABASE_URL` with a free port; resolves once it listens. */
export async function startServerProcess(env: Record<string, string>): Promise<ServerProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: "0",
      HOST: "127.0.0.1",
      NODE_ENV: "test",
      LOG_LEVEL: "info",
      WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY,
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output = (output + chunk.toString()).slice(-200_000)));
  child.stderr!.on("data", (chunk: Buffer) => (output = (output + chunk.toString()).slice(-200_000)));
  const exit = new Promise<number | string | null>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? signal)),
  );
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
    if (match) return { child, url: match[1]!, output: () => output, exited: () => exit };
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.kill("SIGKILL");
  throw new Error(`server did not start:\n${output}`);
}
