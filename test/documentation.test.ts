import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "@jest/globals";

/*
 * The repository documents itself: the README, docs/ and the schema's descriptions cite no document that is not
 * in the repository, and every relative link they hold leads to a file that exists.
 */

const ROOT = join(import.meta.dirname, "..");
const DOCUMENTS = ["README.md", "schema.graphql", ...readdirSync(join(ROOT, "docs")).map((name) => `docs/${name}`)];

describe("the documentation", () => {
  it.each(DOCUMENTS)("%s cites no specification outside the repository", (document) => {
    const text = readFileSync(join(ROOT, document), "utf8");
    expect(text.match(/SPEC(\.md| §)/g) ?? []).toEqual([]);
  });

  it.each(DOCUMENTS.filter((document) => document.endsWith(".md")))(
    "%s links only to files of the repository",
    (document) => {
      const text = readFileSync(join(ROOT, document), "utf8");
      const targets = [...text.matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)]
        .map((match) => match[1]!)
        .filter((target) => !/^[a-z]+:/i.test(target));
      const missing = targets.filter((target) => !existsSync(join(ROOT, dirname(document), target)));
      expect(missing).toEqual([]);
    },
  );
});
