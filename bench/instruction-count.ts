/*
 * `node --import tsx bench/instruction-count.ts <sqlite|postgres> <reference|page> [checkout]`: the instructions the
 * server executes per request, counted by valgrind's callgrind, for deciding a change that timing cannot see on a
 * shared machine (its speed moves by 40 % between runs; instruction counts repeat to about 2 %).
 *
 * The database comes from `DATA_PATH_MODE=seed node --import tsx bench/data-path.ts` (run in the checkout measured:
 * each checkout seeds with its own schema): pass its printed line, `SEEDED <url> <organization> <key> <reference>`,
 * in COUNT_SEEDED. The checkout (default: this one) must be built (`npm run build`): its `dist/main.js` runs under
 * `valgrind --tool=callgrind` with `node --predictable` (one thread for the JIT and the collector, so that the
 * counts repeat), instrumented only between the warm-up and the end of the measured requests. Requests go one at a
 * time, random references or tag pairs from a fixed seed, as the data path's rows (bench/data-path.ts).
 *
 * Prints the instructions per request of the event loop's thread and of all threads (the SQLite read thread
 * included), each with and without the JIT's optimizing compilation, which --predictable runs on the event loop's
 * thread and which a server under load runs on helper threads.
 *
 * Settings: COUNT_WARMUP 600 and COUNT_REQUESTS 300 requests.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import Sqlite from "better-sqlite3";
import pg from "pg";
import { BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";

const [kind, row, checkout = join(import.meta.dirname, "..")] = process.argv.slice(2);
if ((kind !== "sqlite" && kind !== "postgres") || (row !== "reference" && row !== "page")) {
  throw new Error("usage: instruction-count.ts <sqlite|postgres> <reference|page> [checkout]");
}
const [, url, , apiKey] = (process.env.COUNT_SEEDED ?? "").trim().split(/\s+/);
if (!url || !apiKey) throw new Error("COUNT_SEEDED: the line DATA_PATH_MODE=seed printed");
const warmup = Number(process.env.COUNT_WARMUP ?? 600);
const measured = Number(process.env.COUNT_REQUESTS ?? 300);

const REFERENCE_QUERY = `query DataPathReference($id: ID!) {
  reference(id: $id) {
    tags { id name }
    events(first: 20) { edges { cursor node { id type occurredAt detail } } pageInfo { hasNextPage endCursor } }
  }
}`;

async function seededKeys(): Promise<{ referenceIds: string[]; tagNames: string[] }> {
  if (kind === "sqlite") {
    const database = new Sqlite(url!.slice("file:".length), { readonly: true });
    try {
      return {
        referenceIds: database.prepare(`SELECT "id" FROM "shipping_references"`).pluck().all() as string[],
        tagNames: database.prepare(`SELECT "name" FROM "tags"`).pluck().all() as string[],
      };
    } finally {
      database.close();
    }
  }
  const client = new pg.Client(url);
  await client.connect();
  try {
    const references = await client.query<{ id: string }>(`SELECT "id"::text AS "id" FROM "shipping_references"`);
    const tags = await client.query<{ name: string }>(`SELECT "name" FROM "tags"`);
    return { referenceIds: references.rows.map((r) => r.id), tagNames: tags.rows.map((t) => t.name) };
  } finally {
    await client.end();
  }
}

const { referenceIds, tagNames } = await seededKeys();
let state = 7;
const random = () => (state = (state * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;

const out = mkdtempSync(join(tmpdir(), "reftrail-callgrind-"));
const port = 20_000 + Math.floor(Math.random() * 20_000);
const server = spawn(
  "valgrind",
  [
    "--tool=callgrind",
    "--instr-atstart=no",
    "--separate-threads=yes",
    "--smc-check=all-non-file",
    `--callgrind-out-file=${join(out, "callgrind.out")}`,
    "node",
    "--predictable",
    join(resolve(checkout), "dist", "main.js"),
  ],
  {
    cwd: resolve(checkout),
    env: {
      ...process.env,
      NODE_ENV: "production",
      LOG_LEVEL: "silent",
      RATE_LIMIT_PER_MINUTE: "off",
      COST_BUDGET_MAXIMUM: "1e12",
      COST_BUDGET_RESTORE_RATE: "1e12",
      WEBHOOK_WORKER: "off",
      WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY,
      DATABASE_URL: url,
      PORT: String(port),
    },
    stdio: ["ignore", "ignore", "ignore"],
  },
);
const base = `http://127.0.0.1:${port}`;
for (let attempt = 0; ; attempt++) {
  try {
    if ((await fetch(`${base}/health`)).status < 500) break;
  } catch {
    if (attempt > 600) throw new Error("the server under valgrind did not start");
  }
  await new Promise((done) => setTimeout(done, 500));
}

const headers = { "x-api-key": apiKey, "content-type": "application/json", "cache-control": "no-cache" };
async function oneRequest(): Promise<void> {
  let response: Response;
  if (row === "page") {
    const first = pick(tagNames);
    let second = pick(tagNames);
    while (second === first) second = pick(tagNames);
    const query = `tag_names=${first}&tag_names=${second}&tag_match=any&limit=50`;
    response = await fetch(`${base}/v1/references?${query}`, { headers });
  } else {
    const body = JSON.stringify({ query: REFERENCE_QUERY, variables: { id: pick(referenceIds) } });
    response = await fetch(`${base}/graphql`, { method: "POST", headers, body });
  }
  const text = await response.text();
  if (response.status !== 200 || text.includes(`"errors"`)) throw new Error(`${response.status} ${text.slice(0, 200)}`);
}

for (let index = 0; index < warmup; index++) await oneRequest();
execFileSync("callgrind_control", ["--instr=on", String(server.pid)], { stdio: "ignore" });
for (let index = 0; index < measured; index++) await oneRequest();
execFileSync("callgrind_control", ["--instr=off", String(server.pid)], { stdio: "ignore" });
server.kill("SIGINT");
await new Promise((done) => server.once("exit", done));

let all = 0;
let eventLoop = 0;
let compilation = 0;
for (const file of readdirSync(out)) {
  const totals = /^totals: (\d+)/m.exec(readFileSync(join(out, file), "utf8"));
  const count = totals ? Number(totals[1]) : 0;
  all += count;
  // Thread 1 is the event loop's; --predictable compiles optimized code there.
  if (file.endsWith("-01")) {
    eventLoop = count;
    const annotated = execFileSync("callgrind_annotate", ["--inclusive=yes", join(out, file)], {
      encoding: "utf8",
      maxBuffer: 1 << 28,
    });
    const compiled = /^\s*([\d,]+) .*Runtime_CompileOptimized/m.exec(annotated);
    compilation = compiled ? Number(compiled[1]!.replace(/,/g, "")) : 0;
  }
}
rmSync(out, { recursive: true, force: true });
const perRequest = (count: number) => Math.round(count / measured / 1000).toLocaleString("en-US");
console.log(
  `${kind} ${row} ${resolve(checkout)}: thousand instructions a request, event loop's thread ${perRequest(eventLoop)} ` +
    `(${perRequest(eventLoop - compilation)} without the JIT's compilation), all threads ${perRequest(all)} ` +
    `(${perRequest(all - compilation)})`,
);
