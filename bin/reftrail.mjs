#!/usr/bin/env node
// Entry point of the `reftrail` command: runs the compiled JavaScript in dist/ (built by `npm install`,
// `npm start` and `npm run build`), so that no TypeScript compiler loads on each call.
const entry = new URL("../dist/cli/reftrail-cli.js", import.meta.url);
let cli;
try {
  cli = await import(entry.href);
} catch (error) {
  if (error?.code !== "ERR_MODULE_NOT_FOUND" || !String(error.message).includes(entry.pathname)) throw error;
  process.stderr.write("reftrail: the command is not built yet; run `npm run build` first\n");
  process.exit(1);
}
await cli.runCli(process.argv);
