import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { format } from "prettier";
import { SETTING_GROUP_TITLES, SETTINGS, TEST_SETTINGS, type SettingGroup } from "../src/settings-catalog.ts";

/*
 * docs/settings.md, generated from src/settings-catalog.ts: `npm run docs:settings` writes it, and
 * test/settings-doc.test.ts fails when the committed page differs from what this renders.
 */

export const SETTINGS_PAGE = join(import.meta.dirname, "..", "docs", "settings.md");

/** A description as a sentence: capitalized, ending with a full stop. */
function sentence(text: string): string {
  const trimmed = text.trim();
  const capitalized = trimmed.charAt(0).toUpperCase() + trimmed.slice(1);
  return /[.!?)]$/.test(capitalized) && !capitalized.endsWith(")") ? capitalized : `${capitalized}.`;
}

function entry(setting: { name: string; default: string; description: string }): string {
  return `### \`${setting.name}\`\n\n${sentence(setting.description)}\n\nDefault: ${setting.default}.\n`;
}

/** The page's Markdown, formatted as Prettier formats it (the repository's format check reads it too). */
export async function renderSettingsPage(): Promise<string> {
  const groups = Object.keys(SETTING_GROUP_TITLES) as SettingGroup[];
  const parts = [
    "# Settings",
    "<!-- Generated from src/settings-catalog.ts by `npm run docs:settings`: edit the catalog, not this page. -->",
    "Every setting is an environment variable with a working default, read only by `src/config.ts`; a value it " +
      "cannot read stops the server at start with one line naming the variable. Durations need a unit (the `ms` " +
      "package reads them): `250ms`, `5s`, `1.5h`, `10 minutes`, `2d`. Switches take `on`/`off` (or `true`/`false`, " +
      "`1`/`0`).",
    [...groups.map((group) => SETTING_GROUP_TITLES[group]), "Read by the tests"]
      .map((title) => `- [${title}](#${slug(title)})`)
      .join("\n"),
    ...groups.flatMap((group) => [
      `## ${SETTING_GROUP_TITLES[group]}`,
      ...SETTINGS.filter((setting) => setting.group === group).map(entry),
    ]),
    "The OpenTelemetry SDK reads its other standard settings itself: `OTEL_EXPORTER_OTLP_HEADERS` (or " +
      "`OTEL_EXPORTER_OTLP_TRACES_HEADERS`) and `_TIMEOUT`, `OTEL_BSP_SCHEDULE_DELAY` and the batch's sizes, " +
      "`OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG` (default: every trace), `OTEL_RESOURCE_ATTRIBUTES`.",
    "## Read by the tests",
    "The server never reads these; `npm test` does.",
    ...TEST_SETTINGS.map(entry),
  ];
  return format(parts.join("\n\n"), { parser: "markdown", printWidth: 120, proseWrap: "always" });
}

/** GitHub's anchor of a heading: lower case, spaces to hyphens, punctuation dropped. */
export function slug(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

if (process.argv[1] === import.meta.filename) {
  writeFileSync(SETTINGS_PAGE, await renderSettingsPage());
  console.log(`wrote ${SETTINGS_PAGE}`);
}
