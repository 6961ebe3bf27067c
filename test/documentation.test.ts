import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { describe, expect, it } from "@jest/globals";
import { renderDecisionsIndex, DECISIONS_INDEX } from "../scripts/decisions-index.ts";
import { ERROR_CODES } from "../src/domain/shared/errors.ts";
import { GRAPHQL_CODE_BY_DOMAIN_CODE } from "../src/pipeline/errors/graphql-errors.ts";

/*
 * The repository documents itself: the README, docs/ and the schema's descriptions cite no document that is not
 * in the repository, every relative link they hold leads to a file that exists (and to a heading of it, when the
 * link names one), docs/contract.md names every error code a client can receive, and the pages stay readable:
 * the README short and narrow, no hand-written page under docs/ over 400 lines, the decisions' index current.
 */

const ROOT = join(import.meta.dirname, "..");
const DOCUMENTS = [
  "README.md",
  "schema.graphql",
  ...readdirSync(join(ROOT, "docs"), { recursive: true, encoding: "utf8" })
    .map((name) => `docs/${name}`)
    .filter((path) => statSync(join(ROOT, path)).isFile())
    .sort(),
];
const MARKDOWN = DOCUMENTS.filter((document) => document.endsWith(".md"));
/** Pages allowed past 400 lines: generated ones, and the log of past benchmark runs. */
const LONG_PAGES = ["docs/settings.md", "docs/decisions/README.md", "docs/benchmarks-history.md"];

/** GitHub's anchor of a heading: inline links reduced to their text, lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** A Markdown text without its fenced code blocks (a link or heading inside one is not one). */
function withoutCode(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, "");
}

/** The anchors a Markdown page offers: its headings' (a repeated heading gets -1, -2, …), and explicit ids. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const [, heading] of withoutCode(text).matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = slug(heading!);
    const count = seen.get(base) ?? 0;
    anchors.add(count === 0 ? base : `${base}-${count}`);
    seen.set(base, count + 1);
  }
  for (const [, id] of text.matchAll(/<a (?:id|name)="([^"]+)"/g)) anchors.add(id!);
  return anchors;
}

/** Relative links of a Markdown page that lead nowhere: a missing file, or a missing heading of a Markdown file. */
function brokenLinks(document: string, text = readFileSync(join(ROOT, document), "utf8")): string[] {
  const broken: string[] = [];
  for (const [, target] of withoutCode(text).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target!)) continue; // http:, https:, mailto: …
    const [path, anchor] = target!.split("#", 2) as [string, string | undefined];
    const file = path === "" ? join(ROOT, document) : normalize(join(ROOT, dirname(document), decodeURI(path)));
    if (!existsSync(file)) {
      broken.push(`${target} (no such file)`);
      continue;
    }
    if (anchor === undefined || !file.endsWith(".md")) continue;
    const page = path === "" ? text : readFileSync(file, "utf8");
    if (!anchorsOf(page).has(decodeURIComponent(anchor))) broken.push(`${target} (no such heading)`);
  }
  return broken;
}

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

const README = readFileSync(join(ROOT, "README.md"), "utf8");

describe("the README", () => {
  it("reads to the end: at most 300 lines, none wider than 120 characters", () => {
    const lines = README.split("\n");
    expect(lines.length).toBeLessThanOrEqual(300);
    expect(lines.filter((line) => line.length > 120)).toEqual([]);
  });

  it("names on its first screen every service `npm test` needs, and how to start each", () => {
    const firstScreen = README.split("\n").slice(0, 40).join("\n");
    expect(firstScreen).toMatch(/^npm install && npm start/m);
    expect(firstScreen).toMatch(/^npm test/m);
    for (const [service, start] of [
      ["PostgreSQL", "docker run -d --name reftrail-postgres -p 5432:5432"],
      ["RabbitMQ", "docker run -d --name reftrail-rabbitmq -p 5672:5672"],
      ["NATS with JetStream", "docker run -d --name reftrail-nats -p 4222:4222 nats:2 -js"],
    ]) {
      expect(firstScreen).toContain(service);
      expect(firstScreen).toContain(start);
    }
  });
});

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

  it.each(MARKDOWN)("%s: every relative link leads to a file of the repository, and to its heading", (document) => {
    expect(brokenLinks(document)).toEqual([]);
  });

  it("the link check finds a missing file and a missing heading (it can fail)", () => {
    expect(anchorsOf("# A title\n## `SOME_SETTING`\n## Twice\n## Twice\n```\n# not a heading\n```")).toEqual(
      new Set(["a-title", "some_setting", "twice", "twice-1"]),
    );
    expect(slug("10^8 events")).toBe("108-events");
    expect(
      brokenLinks("docs/rest.md", "[a](contract.md#no-such-heading) [b](missing.md) [c](contract.md#errors) [d](#x)"),
    ).toEqual(["contract.md#no-such-heading (no such heading)", "missing.md (no such file)", "#x (no such heading)"]);
    expect(slug("Run 4: both databases, `main` at 3185386 / ba9552b")).toBe(
      "run-4-both-databases-main-at-3185386--ba9552b",
    );
  });

  it.each(MARKDOWN.filter((document) => document.startsWith("docs/") && !LONG_PAGES.includes(document)))(
    "%s holds at most 400 lines",
    (document) => {
      expect(readFileSync(join(ROOT, document), "utf8").split("\n").length).toBeLessThanOrEqual(400);
    },
  );

  it("docs/decisions/README.md is the index its records generate (run `npm run docs:decisions`)", async () => {
    expect(readFileSync(DECISIONS_INDEX, "utf8")).toBe(await renderDecisionsIndex());
  });
});
