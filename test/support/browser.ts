/**
 * The headless Chromium the browser suites drive, provisioned by `npm install` alone: the `@sparticuz/chromium`
 * dev dependency carries a compressed headless Chromium, unpacked once per version into the temporary directory
 * and driven through `playwright-core`. `CHROMIUM_PATH` names another Chromium instead (for a platform the
 * package has no binary for).
 *
 * Where no browser can start, a browser suite is replaced by one failing test whose message is one line saying
 * what to install; the tests of the same file that need no browser run as usual.
 */
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rename, rm } from "node:fs/promises";
import { execFile } from "node:child_process";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { describe, it } from "@jest/globals";
import { chromium, type Browser } from "playwright-core";

const CHROMIUM_ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-quic",
  "--no-first-run",
  "--disable-component-update",
  "--disable-sync",
];

const execFileAsync = promisify(execFile);

const INSTALL_HINT =
  "run `npm install` (the @sparticuz/chromium dev dependency carries a headless Chromium for Linux x64/arm64), " +
  "or install Chromium and set CHROMIUM_PATH to its executable";

/**
 * Unpacks the packaged Chromium into `<tmp>/reftrail-chromium-<version>/` and returns the executable. The package
 * unpacks into `os.tmpdir()`, so it runs with TMPDIR pointing at a private staging folder that is then renamed
 * into place: two test workers unpacking at once never see each other's half-written files.
 */
async function unpackPackagedChromium(): Promise<string> {
  const version = packagedChromiumVersion();
  const target = join(tmpdir(), `reftrail-chromium-${version}`);
  const executable = join(target, "chromium");
  if (existsSync(executable)) return executable;

  const staging = await mkdtemp(join(tmpdir(), `reftrail-chromium-${version}-staging-`));
  // A child process, because the package reads os.tmpdir(), which follows the real environment of the process
  // and not the copy a test file sees.
  try {
    await execFileAsync(
      process.execPath,
      ["--input-type=module", "-e", 'await (await import("@sparticuz/chromium")).default.executablePath();'],
      { env: { ...process.env, TMPDIR: staging } },
    );
  } catch (error) {
    await rm(staging, { recursive: true, force: true });
    throw error;
  }
  try {
    await rename(staging, target);
  } catch (error) {
    // Another worker finished first: its copy is complete, this one is not needed.
    await rm(staging, { recursive: true, force: true });
    if (!existsSync(executable)) throw error;
  }
  return executable;
}

/** The package exports no `package.json`, so its version is read from the folder its entry point lives in. */
function packagedChromiumVersion(): string {
  let folder = dirname(createRequire(import.meta.url).resolve("@sparticuz/chromium"));
  for (;;) {
    const manifest = join(folder, "package.json");
    if (existsSync(manifest)) {
      const { name, version } = JSON.parse(readFileSync(manifest, "utf8")) as { name?: string; version: string };
      if (name === "@sparticuz/chromium") return version;
    }
    if (dirname(folder) === folder) throw new Error("@sparticuz/chromium has no package.json");
    folder = dirname(folder);
  }
}

async function locateChromium(): Promise<{ executablePath: string } | { problem: string }> {
  const configured = process.env.CHROMIUM_PATH;
  if (configured) {
    return existsSync(configured)
      ? { executablePath: configured }
      : { problem: `CHROMIUM_PATH=${configured} does not exist` };
  }
  if (process.platform !== "linux") {
    return { problem: `@sparticuz/chromium has no Chromium for ${process.platform}` };
  }
  try {
    return { executablePath: await unpackPackagedChromium() };
  } catch (error) {
    return { problem: `@sparticuz/chromium could not unpack its Chromium (${firstLine(error)})` };
  }
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0] ?? "";
}

/** A failure jest prints as its message alone: the stack of the provisioning code would say nothing more. */
function browserMissing(problem: string): Error {
  const error = new Error(`No headless Chromium: ${problem}; ${INSTALL_HINT}.`);
  error.stack = error.message;
  return error;
}

/** Resolved once per test file, before any test runs. */
const located = await locateChromium();

/** Starts a headless Chromium; a browser that will not start fails with the one-line install hint. */
export async function launchBrowser(): Promise<Browser> {
  if ("problem" in located) throw browserMissing(located.problem);
  try {
    return await chromium.launch({ executablePath: located.executablePath, args: CHROMIUM_ARGS });
  } catch (error) {
    throw browserMissing(`${located.executablePath} did not start (${firstLine(error)})`);
  }
}

/**
 * `describe` for tests that need a browser. With no browser to be had, the suite is one failing test that says
 * what to install, instead of every test failing on the same missing executable.
 */
export function describeInBrowser(title: string, body: () => void): void {
  if ("problem" in located) {
    const problem = located.problem;
    describe(title, () => {
      it("needs a headless Chromium", () => {
        throw browserMissing(problem);
      });
    });
    return;
  }
  describe(title, body);
}
