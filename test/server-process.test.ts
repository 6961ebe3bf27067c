import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "@jest/globals";
import { expectEventually } from "./support/expect-eventually.ts";
import { createTestDatabase, TEST_WEBHOOK_SECRET_KEY, type TestDatabase } from "./support/test-server.ts";

/*
 * The process as an operator runs it: `npm start` and its compiled entry point (migrations, the one-time
 * default key, graceful shutdown on SIGTERM) and the `reftrail` command, against real databases.
 */

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "..");

interface RunningServer {
  readonly child: ChildProcess;
  readonly url: string;
  readonly output: () => string;
}

async function startServerProcess(databaseUrl: string, env: Record<string, string> = {}): Promise<RunningServer> {
  const child = spawn(process.execPath, ["dist/main.js"], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      PORT: "0",
      HOST: "127.0.0.1",
      NODE_ENV: "development",
      LOG_LEVEL: "info",
      ...env,
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

/** A port nothing listens on right now. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function portIsFree(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** Whether any process of the group `groupId` is still alive. */
function groupAlive(groupId: number): boolean {
  try {
    process.kill(-groupId, 0);
    return true;
  } catch {
    return false;
  }
}

describe("the server process", () => {
  const folder = mkdtempSync(join(tmpdir(), "reftrail-process-"));
  afterAll(() => rmSync(folder, { recursive: true, force: true }));

  it("`npm start` builds, serves, and stops with every process on SIGTERM sent to npm", async () => {
    const port = await freePort();
    // Its own process group, so that the test can tell whether anything npm started is still running.
    const npm = spawn("npm", ["start"], {
      cwd: ROOT,
      detached: true,
      env: {
        ...process.env,
        DATABASE_URL: `file:${join(folder, "npm-start.db")}`,
        PORT: String(port),
        HOST: "127.0.0.1",
        NODE_ENV: "development",
        LOG_LEVEL: "info",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    npm.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    npm.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | string | null>((resolve) =>
      npm.once("exit", (code, signal) => resolve(code ?? signal)),
    );
    try {
      const deadline = Date.now() + 90_000;
      while (!output.includes("Server listening at") && npm.exitCode === null && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(output).toContain(`Server listening at http://127.0.0.1:${port}`);
      // The compiled server, not the TypeScript sources.
      expect(output).toContain("node dist/main.js");
      expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);

      npm.kill("SIGTERM");
      expect(await exited).toBe(0);
      expect(output).toContain("shutdown complete");
      expect(await portIsFree(port)).toBe(true);
      expect(groupAlive(npm.pid!)).toBe(false);
    } finally {
      if (groupAlive(npm.pid!)) process.kill(-npm.pid!, "SIGKILL");
    }
  });

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
    // Every start, not only the first, says where to go; without a terminal as one JSON record.
    for (const { output, url } of [first, second]) {
      const ready = output()
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .find((record) => typeof record.msg === "string" && record.msg.startsWith("reftrail is ready"));
      expect(ready).toMatchObject({
        explorer: `${url}/graphql`,
        operator: `${url}/operator`,
        openapi: `${url}/v1/openapi.json`,
        health: `${url}/healthz`,
      });
    }
    second.child.kill("SIGTERM");
    expect(await exitOf(second.child)).toBe(0);
  });

  it("with LOG_FORMAT=pretty prints readable lines, one per request, and where to go", async () => {
    const server = await startServerProcess(`file:${join(folder, "pretty.db")}`, { LOG_FORMAT: "pretty" });
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    await expectEventually(
      () => server.output(),
      (output) => expect(output).toMatch(/INFO.*GET \/healthz 200 [\d.]+ ms/),
      { timeoutMs: 15_000 },
    );
    const output = server.output();
    expect(output).toContain(`GraphQL explorer  ${server.url}/graphql`);
    expect(output).toContain(`operator page     ${server.url}/operator`);
    expect(output).toContain(`REST (OpenAPI)    ${server.url}/v1/openapi.json`);
    expect(output).toContain(`health            ${server.url}/healthz`);
    expect(output.split("\n").filter((line) => line.startsWith("{"))).toEqual([]);
    expect(output).not.toContain("incoming request");
    server.child.kill("SIGTERM");
    expect(await exitOf(server.child)).toBe(0);
  });

  it("says how to create the first organization when a production server starts without one", async () => {
    const databaseUrl = `file:${join(folder, "production.db")}`;
    const server = await startServerProcess(databaseUrl, {
      NODE_ENV: "production",
      WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY,
    });
    expect(server.output()).toContain("no organization exists yet");
    expect(server.output()).toContain("node bin/reftrail.mjs org create <name>");
    expect(server.output()).not.toContain("default organization created");
    server.child.kill("SIGTERM");
    expect(await exitOf(server.child)).toBe(0);

    await cli(databaseUrl, "org", "create", "acme");
    const again = await startServerProcess(databaseUrl, {
      NODE_ENV: "production",
      WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY,
    });
    expect(again.output()).not.toContain("no organization exists yet");
    again.child.kill("SIGTERM");
    expect(await exitOf(again.child)).toBe(0);
  });
});

describe("a PostgreSQL database that does not exist", () => {
  const admin = new URL(process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres");
  const missing = new URL(admin);
  missing.pathname = `/reftrail_missing_${process.pid}`;
  const hint = new RegExp(
    `database "reftrail_missing_${process.pid}" does not exist on ${admin.hostname}:${admin.port || 5432}; create it with \`createdb -h ${admin.hostname} -p ${admin.port || 5432}( -U ${admin.username})? reftrail_missing_${process.pid}\``,
  );

  it("stops the server with a one-line hint, not a stack trace", async () => {
    const child = spawn(process.execPath, ["dist/main.js"], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: missing.toString(), PORT: "0", HOST: "127.0.0.1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    expect(await exitOf(child)).toBe(1);
    expect(stderr).toMatch(hint);
    expect(stderr.trim().split("\n")).toHaveLength(1);
  });

  it("makes the reftrail command exit with the same hint", async () => {
    const failure = await cli(missing.toString(), "org", "list").then(
      () => null,
      (error: { code: number; stderr: string }) => error,
    );
    expect(failure?.code).toBe(1);
    expect(failure?.stderr).toMatch(hint);
    expect(failure?.stderr.trim().split("\n")).toHaveLength(1);
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

  it("lists organizations and their keys without any secret", async () => {
    database ??= await createTestDatabase(kind);
    const first = await cli(database.url, "org", "create", "first");
    const second = await cli(database.url, "org", "create", "second");
    const extra = await cli(database.url, "key", "create", String(second.organization_id));
    await cli(database.url, "key", "revoke", String(extra.api_key_id));

    const { organizations } = (await cli(database.url, "org", "list")) as { organizations: Record<string, unknown>[] };
    const listed = organizations.filter((organization) =>
      [first.organization_id, second.organization_id].includes(organization.organization_id),
    );
    expect(listed).toEqual([
      { organization_id: first.organization_id, name: "first", created_at: expect.any(String) },
      { organization_id: second.organization_id, name: "second", created_at: expect.any(String) },
    ]);

    const raw = await run(process.execPath, ["bin/reftrail.mjs", "key", "list", String(second.organization_id)], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: database.url },
    });
    expect(JSON.parse(raw.stdout)).toEqual({
      organization_id: second.organization_id,
      api_keys: [
        {
          api_key_id: second.api_key_id,
          key_prefix: String(second.api_key).slice(0, 8),
          created_at: expect.any(String),
          revoked_at: null,
        },
        {
          api_key_id: extra.api_key_id,
          key_prefix: String(extra.api_key).slice(0, 8),
          created_at: expect.any(String),
          revoked_at: expect.any(String),
        },
      ],
    });
    expect(raw.stdout).not.toContain(String(second.api_key));
    expect(raw.stdout).not.toContain(String(extra.api_key));

    await expect(cli(database.url, "key", "list", "0190a0c0-0000-7000-8000-000000000000")).rejects.toThrow(
      /organization not found/,
    );
  });

  it("prints its version", async () => {
    const { version } = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
    const { stdout } = await run(process.execPath, ["bin/reftrail.mjs", "--version"], { cwd: ROOT });
    expect(stdout.trim()).toBe(version);
  });
});
