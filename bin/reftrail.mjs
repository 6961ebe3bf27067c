#!/usr/bin/env node
// Entry point of the `reftrail` command: loads the TypeScript sources through tsx, like `npm start`.
import { register } from "tsx/esm/api";

register();
const { runCli } = await import("../src/cli/reftrail-cli.ts");
await runCli(process.argv);
