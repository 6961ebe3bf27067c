import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { format } from "prettier";

/*
 * docs/decisions/README.md, the index of the decision records, generated from the records themselves: each file
 * `NNNN-title.md` gives its number, its first heading and its `Status:` line. `npm run docs:decisions` writes it;
 * test/documentation.test.ts fails when the committed index differs from what this renders.
 */

export const DECISIONS_FOLDER = join(import.meta.dirname, "..", "docs", "decisions");
export const DECISIONS_INDEX = join(DECISIONS_FOLDER, "README.md");

interface DecisionRecord {
  readonly file: string;
  readonly number: string;
  readonly title: string;
  readonly status: string;
}

/** The records of the folder, by number. */
export function decisionRecords(): DecisionRecord[] {
  return readdirSync(DECISIONS_FOLDER)
    .filter((file) => /^\d{4}-.+\.md$/.test(file))
    .sort()
    .map((file) => {
      const text = readFileSync(join(DECISIONS_FOLDER, file), "utf8");
      const heading = /^# (.+)$/m.exec(text)?.[1] ?? file;
      const status = /^[-*]?\s*\**Status\**:?\**\s*(.+)$/im.exec(text)?.[1]?.trim() ?? "";
      return {
        file,
        number: file.slice(0, 4),
        // "0012. Read cache", "0012 - Read cache" and "Read cache" all give "Read cache".
        title: heading.replace(/^\d{4}\s*[.:-]?\s*/, "").trim(),
        status: status.replace(/\|/g, "\\|"),
      };
    });
}

export async function renderDecisionsIndex(): Promise<string> {
  const rows = decisionRecords().map(
    (record) => `| ${record.number} | [${record.title}](${record.file}) | ${record.status} |`,
  );
  const text = [
    "# Decisions",
    "<!-- Generated from the records of this folder by `npm run docs:decisions`: edit a record, not this page. -->",
    "Choices the contract ([contract.md](../contract.md), the guides, `schema.graphql`) left open, and why they " +
      "were made this way: one record per decision, each with its context, the decision and its consequences. " +
      "Code comments cite a decision by its title or by the title of one of its points; search this folder for it.",
    "To add one: write `NNNN-short-title.md` here with the next free number, a first heading `# NNNN. Title`, a " +
      "`- Status:` line (`Accepted.`, or which record supersedes it) and the three sections; then run " +
      "`npm run docs:decisions`. A record that replaces an earlier one says so in its status line, and the earlier " +
      "one's status names it.",
    ["| #   | decision | status |", "| --- | -------- | ------ |", ...rows].join("\n"),
  ];
  return format(text.join("\n\n"), { parser: "markdown", printWidth: 120, proseWrap: "always" });
}

if (process.argv[1] === import.meta.filename) {
  writeFileSync(DECISIONS_INDEX, await renderDecisionsIndex());
  console.log(`wrote ${DECISIONS_INDEX}`);
}
