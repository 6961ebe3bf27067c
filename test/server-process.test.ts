import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "@jest/globals";
import { createTestDatabase, type TestDatabase } from "./support/test-server.ts";

/*
 * The process as an operator runs it: `npm start`'s entry point (migrations, the one-time default key,
 * graceful shutdown on SIGTERM) and the `reftrail` command, against real databases.
 */

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "..");

interface RunningServer {
  readonly child: ChildProcess;
  readonly url: string;
  readonly output: () => string;
}

async function startServerProcess(databaseUrl: string): Promise<RunningServer> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      PORT: "0",
      HOST: "127.0.0.1",
      NODE_ENV: "development",
      LOG_LEVEL: "info",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
    if (match) return { child, url: match[1]!, output: () => output };
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  child.kill("SIGKILL");
  throw new Error(`server did not start:\n${output}`);
}

function exitOf(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    else child.once("exit", (code) => resolve(code));
  });
}

async function cli(databaseUrl: string, ...args: string[]) {
  const { stdout } = await run(process.execPath, ["bin/reftrail.mjs", ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: databaseUrl },
  });
  return JSON.parse(stdout) as Record<string, unknown>;
}

describe("the server process", () => {
  const folder = mkdtempSync(join(tmpdir(), "reftrail-process-"));
  afterAll(() => rmSync(folder, { recursive: true, force: true }));

  it("migrates an empty database, prints the default key once, serves it, and shuts down cleanly on SIGTERM", async () => {
    const databaseUrl = `file:${join(folder, "fresh.db")}`;
    const first = await startServerProcess(databaseUrl);
    const key = /API key \(shown once, store it now\): (rt_\S+)/.exec(first.output())?.[1];
    expect(key).toBeDefined();
    const tags = await fetch(`${first.url}/v1/tags`, { headers: { "x-api-key": key! } });
    expect(tags.status).toBe(200);
    expect((await fetch(`${first.url}/readyz`)).status).toBe(200);

    first.child.kill("SIGTERM");
    expect(await exitOf(first.child)).toBe(0);
    expect(first.output()).toContain("shutdown complete");

    const second = await startServerProcess(databaseUrl);
    expect(second.output()).not.toContain("default organization created");
    second.child.kill("SIGTERM");
    expect(await exitOf(second.child)).toBe(0);
  });
});

describe.each(["sqlite", "postgres"] as const)("the reftrail command on %s", (kind) => {
  let database: TestDatabase | undefined;
  afterAll(async () => database?.drop());

  it("creates organizations and keys, revokes keys, migrates and prunes", async () => {
    database = await createTestDatabase(kind);
    const created = await cli(database.url, "org", "create", "acme");
    expect(created).toMatchObject({ organization_id: expect.any(String), api_key: expect.stringMatching(/^rt_/) });

    const extra = await cli(database.url, "key", "create", String(created.organization_id));
    expect(extra.api_key).not.toBe(created.api_key);
    expect(await cli(database.url, "key", "revoke", String(extra.api_key_id))).toEqual({
      api_key_id: extra.api_key_id,
      revoked: true,
    });

    expect(await cli(database.url, "migrate")).toEqual({ applied: [], already_applied: expect.any(Number) });
    expect(await cli(database.url, "prune")).toMatchObject({ deleted: 0 });

    await expect(cli(database.url, "key", "create", "0190a0c0-0000-7000-8000-000000000000")).rejects.toThrow(
      /organization not found/,
    );
  });
});
