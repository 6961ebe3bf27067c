// Runs before `npm start`: compiles src/ into dist/ only when a source changed since the last successful build,
// so that a start with nothing changed loads no compiler. The stamp dist/.build-stamp is written by `npm run
// build` once tsc succeeds; a source newer than it, or no stamp, means stale.
import { spawnSync } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";

const ROOT = new URL("..", import.meta.url).pathname;
const STAMP = join(ROOT, "dist", ".build-stamp");
// What tsconfig.build.json compiles, and the settings it compiles them with.
const INPUTS = ["src", "tsconfig.json", "tsconfig.build.json", "package-lock.json"];

function newestChange(path) {
  let stats;
  try {
    stats = statSync(path);
  } catch {
    return 0;
  }
  if (!stats.isDirectory()) return stats.mtimeMs;
  let newest = stats.mtimeMs; // a deleted or renamed file changes its folder
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestChange(join(path, entry)));
  return newest;
}

function stampTime() {
  try {
    return statSync(STAMP).mtimeMs;
  } catch {
    return null;
  }
}

const built = stampTime();
const changed = Math.max(...INPUTS.map((input) => newestChange(join(ROOT, input))));
if (built === null || changed > built) {
  process.stderr.write(built === null ? "reftrail: building dist/\n" : "reftrail: sources changed, rebuilding dist/\n");
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const result = spawnSync(npm, ["run", "--silent", "build"], { cwd: ROOT, stdio: "inherit" });
  process.exit(result.status ?? 1);
}
