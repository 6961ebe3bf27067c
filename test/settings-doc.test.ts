import { readFileSync } from "node:fs";
import { describe, expect, it } from "@jest/globals";
import { renderSettingsPage, SETTINGS_PAGE } from "../scripts/settings-page.ts";
import { loadConfig } from "../src/config.ts";
import { SETTINGS } from "../src/settings-catalog.ts";

/*
 * One source for the settings (issue 51): docs/settings.md is what `npm run docs:settings` generates from
 * src/settings-catalog.ts, and the catalog names exactly the variables src/config.ts reads.
 */

/** The environment variables `loadConfig` reads, seen through a proxy over an environment of `values`. */
function namesRead(values: Record<string, string>): Set<string> {
  const read = new Set<string>();
  const env = new Proxy(values, {
    get(target, name) {
      if (typeof name === "string") read.add(name);
      return Reflect.get(target, name) as unknown;
    },
  });
  loadConfig(env as NodeJS.ProcessEnv, false);
  return read;
}

describe("the settings reference", () => {
  it("docs/settings.md is what the catalog generates (run `npm run docs:settings`)", async () => {
    expect(readFileSync(SETTINGS_PAGE, "utf8")).toBe(await renderSettingsPage());
  });

  it("the catalog names every variable src/config.ts reads, and no other", () => {
    const read = new Set([
      ...namesRead({}),
      ...namesRead({ NODE_ENV: "production", OTEL_TRACES_EXPORTER: "console", DATABASE_URL: "postgresql://x/y" }),
    ]);
    expect([...read].sort()).toEqual(SETTINGS.map((setting) => setting.name).sort());
  });

  it("the catalog names each variable once", () => {
    const names = SETTINGS.map((setting) => setting.name);
    expect(names.filter((name, index) => names.indexOf(name) !== index)).toEqual([]);
  });
});
