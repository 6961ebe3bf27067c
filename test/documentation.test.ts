import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "@jest/globals";
import { ERROR_CODES } from "../src/domain/shared/errors.ts";
import { GRAPHQL_CODE_BY_DOMAIN_CODE } from "../src/pipeline/errors/graphql-errors.ts";

/*
 * The repository documents itself: the README, docs/ and the schema's descriptions cite no document that is not
 * in the repository, every relative link they hold leads to a file that exists, and docs/contract.md names every
 * error code a client can receive.
 */

const ROOT = join(import.meta.dirname, "..");
// Every Markdown file under docs/, decision records (docs/decisions/) included.
const DOCUMENTS = [
  "README.md",
  "schema.graphql",
  ...readdirSync(join(ROOT, "docs"), { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
];

/** The TypeScript sources under `folder` (generated code aside), as text. */
function sourcesUnder(folder: string): string[] {
  return readdirSync(join(ROOT, folder), { recursive: true, encoding: "utf8" })
    .filter((file) => file.endsWith(".ts") && !file.includes("__generated__"))
    .map((file) => readFileSync(join(ROOT, folder, file), "utf8"));
}

/** Codes Apollo Server itself answers with, which no line of ours spells: see docs/contract.md. */
const APOLLO_CODES = ["PERSISTED_QUERY_NOT_FOUND", "OPERATION_RESOLUTION_FAILURE"];

/** Every error code a client can receive: the domain's, their GraphQL names, and each transport's own. */
function errorCodes(): Set<string> {
  const codes = new Set<string>([...ERROR_CODES, ...Object.values(GRAPHQL_CODE_BY_DOMAIN_CODE), ...APOLLO_CODES]);
  // REST: every problem details answer is built by `problem(status, "CODE", …)`.
  for (const text of sourcesUnder("src/rest")) {
    for (const [, code] of text.matchAll(/\bproblem\(\s*[^,()]+,\s*"([A-Z][A-Z_]+)"/g)) codes.add(code!);
  }
  // GraphQL (HTTP and WebSocket): `extensions.code` literals, named code constants, the transport's mapper.
  for (const text of [...sourcesUnder("src/graphql"), ...sourcesUnder("src/live")]) {
    for (const [, code] of text.matchAll(
      /(?:\bcode: |\bconst [A-Z_]+ = |\breturn |withCode\([^,]+, )"([A-Z][A-Z_]+)"/g,
    )) {
      codes.add(code!);
    }
  }
  return codes;
}

describe("the documentation", () => {
  it("docs/contract.md names every error code a client can receive", () => {
    const contract = readFileSync(join(ROOT, "docs/contract.md"), "utf8");
    const codes = errorCodes();
    expect(codes.size).toBeGreaterThan(ERROR_CODES.length);
    expect([...codes].filter((code) => !contract.includes(`\`${code}\``)).sort()).toEqual([]);
  });

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
