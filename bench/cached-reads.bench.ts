/*
 * The secondary tables of `npm run bench` (part `cached`, alias `reads`): the reference listing (part A) and one
 * page of a long lifecycle log (part B) on SQLite and PostgreSQL, at 100,000 references and 1,000,000 events.
 * Part A repeats one URL (or one query with the same variables) per row, so after the first request the read
 * cache answers: it shows the cache, not the data path (bench/data-path.bench.ts is the headline for that).
 * Part B asks with `Cache-Control: no-cache`: it measures the keyset path through the log. Everything it
 * creates is removed at the end; it writes BENCH_OUTPUT (bench/results.json, not committed). Its settings are
 * listed in bench/run.ts.
 */
// First: libraries read NODE_ENV when they load.
import "./production-env.ts";
import { writeFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import Sqlite from "better-sqlite3";
import pg from "pg";
import type { App } from "../src/app.ts";
import { sqliteFilePath } from "../src/store/database.ts";
import { HELLO_QUERY, startBaseline } from "./baseline.ts";
import { LoadGenerator, type LoadResult, type LoadSpec } from "./load.ts";
import { containerNumber, seedEventLog, seedReferences, type Kind } from "./seed.ts";
import { createTestDatabase } from "../test/support/test-server.ts";
import { benchDatabases, intSetting } from "./settings.ts";
import { startBenchApp } from "./bench-app.ts";

// ---------------------------------------------------------------------------------------------------------------
// Settings

const settings = {
  databases: benchDatabases(),
  tags: intSetting("BENCH_TAGS", 1_000, 1),
  references: intSetting("BENCH_REFERENCES", 100_000, 1),
  createdEvents: intSetting("BENCH_CREATED_EVENTS", 1) !== 0,
  // The full 1,000,000 events fit the time budget: about 23 s to seed on SQLite and 25 s on PostgreSQL on a
  // busy 2-core machine, and a whole default run takes about 4 minutes.
  events: intSetting("BENCH_EVENTS", 1_000_000, 200),
  durationSeconds: intSetting("BENCH_DURATION_SECONDS", 10, 1),
  warmupSeconds: intSetting("BENCH_WARMUP_SECONDS", 2),
  connections: intSetting("BENCH_CONNECTIONS", 50, 1),
  sequential: intSetting("BENCH_SEQUENTIAL", 200, 10),
  sequentialMaxSeconds: intSetting("BENCH_SEQUENTIAL_MAX_SECONDS", 20, 1),
  tag: process.env.BENCH_TAG ?? "tag-0500",
  sqliteAnalyze: intSetting("BENCH_SQLITE_ANALYZE", 0) !== 0,
  output: process.env.BENCH_OUTPUT ?? join(import.meta.dirname, "results.json"),
  adminUrl: process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres",
};

const GRAPHQL_REFERENCES = `query BenchReferences($names: [String!]) {
  references(first: 50, filter: { tagNames: $names }) {
    edges { cursor node { id containerId carrierCode tags { id name } } }
    pageInfo { hasNextPage endCursor }
  }
}`;

const GRAPHQL_REFERENCE_WITH_EVENTS = `query BenchReference($id: ID!) {
  reference(id: $id) {
    id tags { id name }
    events(first: 50) { edges { cursor node { id type occurredAt } } pageInfo { hasNextPage endCursor } }
  }
}`;

// ---------------------------------------------------------------------------------------------------------------
// Small helpers

const log = (message: string) =>
  console.error(`[bench ${((performance.now() - runStarted) / 1000).toFixed(0).padStart(4)}s] ${message}`);
const runStarted = performance.now();
const loadAtStart = loadavg();
const loadGenerator = new LoadGenerator();
const runLoad = (spec: LoadSpec) => loadGenerator.run(spec);

interface BenchDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

/** Databases not yet dropped, so that Ctrl-C does not leave a `reftrail_bench_*` database behind. */
const liveDatabases = new Set<BenchDatabase>();
process.once("SIGINT", () => {
  log("interrupted: dropping the benchmark databases");
  void Promise.allSettled([...liveDatabases].map((database) => database.drop())).then(() => process.exit(130));
});

function baseUrlOf(app: App): string {
  const address = app.http.server.address();
  if (!address || typeof address === "string") throw new Error("server did not bind a TCP port");
  return `http://127.0.0.1:${address.port}`;
}

async function getJson<T>(url: string, init: RequestInit = {}): Promise<T> {
  const response = await fetch(url, init);
  const text = await response.text();
  if (!response.ok) throw new Error(`${init.method ?? "GET"} ${url} -> ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as T;
}

function check(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`benchmark sanity check failed: ${message}`);
}

/**
 * One load run: the connections open, warm up, then are measured (load-worker.mjs; how long they took to be all
 * served once is the row's `ramp` note).
 */
async function measure(
  spec: Omit<LoadSpec, "durationSeconds" | "warmupSeconds" | "amount" | "connections">,
): Promise<LoadResult> {
  return runLoad({
    ...spec,
    connections: settings.connections,
    durationSeconds: settings.durationSeconds,
    warmupSeconds: settings.warmupSeconds,
  });
}

/** `count` requests one after the other (fewer when a page is slow), after 10% as warm-up. */
async function measureSequential(url: string, headers: Record<string, string>): Promise<LoadResult> {
  const probeStart = performance.now();
  await getJson(url, { headers });
  const probeMs = performance.now() - probeStart;
  const affordable = Math.floor((settings.sequentialMaxSeconds * 1000) / Math.max(probeMs, 0.01));
  const count = Math.max(10, Math.min(settings.sequential, affordable));
  await runLoad({ url, headers, connections: 1, amount: Math.max(1, Math.ceil(count / 10)) });
  return runLoad({ url, headers, connections: 1, amount: count });
}

// ---------------------------------------------------------------------------------------------------------------
// SQLite storage-format check: a seeded row must look exactly like one the application wrote itself.

type Shape = Record<string, string>;

function sqliteShapes(db: Sqlite.Database, table: string, where: string, params: unknown[]): Shape {
  const columns = (db.prepare(`PRAGMA table_info("${table}")`).all() as { name: string }[]).map((c) => c.name);
  const select = columns.map((c) => `typeof("${c}") AS "${c}__type", "${c}"`).join(", ");
  const row = db.prepare(`SELECT ${select} FROM "${table}" WHERE ${where} LIMIT 1`).get(...params) as
    Record<string, unknown> | undefined;
  if (!row) throw new Error(`format check: no ${table} row where ${where}`);
  const shape: Shape = {};
  for (const column of columns) {
    const value = row[column];
    let kind = String(row[`${column}__type`]);
    if (typeof value === "string") {
      if (/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$/.test(value)) kind += ":datetime(+00:00)";
      else if (/^\d{4}-\d\d-\d\d[T ]/.test(value)) kind += `:datetime(other:${value})`;
      else if (/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(value)) kind += ":uuidv7";
      else if (/^[[{]/.test(value)) {
        const parsed = JSON.parse(value) as unknown;
        const keys = Array.isArray(parsed)
          ? parsed.length > 0
            ? Object.keys(parsed[0] as object)
                .sort()
                .join(",")
            : ""
          : Object.keys(parsed as object)
              .sort()
              .join(",");
        kind += `:json(${Array.isArray(parsed) ? "array" : "object"}${keys ? `:${keys}` : ""})`;
      }
    }
    if (value !== null) shape[column] = kind;
  }
  return shape;
}

function compareShapes(table: string, written: Shape, seeded: Shape): void {
  for (const [column, kind] of Object.entries(written)) {
    if (seeded[column] === undefined) continue; // null in the seeded row
    if (column === "reference_tags" && (kind.endsWith("array)") || seeded[column]!.endsWith("array)"))) continue; // empty snapshot
    check(
      seeded[column] === kind,
      `${table}.${column}: the application writes ${kind}, the seed wrote ${seeded[column]}`,
    );
  }
}

// ---------------------------------------------------------------------------------------------------------------
// One database

interface SeedReport {
  readonly tags: number;
  readonly references: number;
  readonly referenceTagRows: number;
  readonly createdEventRows: number;
  readonly seedReferencesSeconds: number;
  readonly events: number;
  readonly seedEventsSeconds: number;
  readonly formatCheck: string;
}

interface ListingRow {
  readonly name: string;
  readonly result: LoadResult | null;
  readonly error?: string;
}

interface LogRow {
  readonly position: string;
  readonly query: string;
  readonly result: LoadResult;
}

interface DatabaseReport {
  readonly kind: Kind;
  readonly seed: SeedReport;
  readonly tag: { readonly name: string; readonly references: number };
  readonly listing: ListingRow[];
  readonly log: LogRow[];
}

async function benchDatabase(kind: Kind): Promise<DatabaseReport> {
  log(`${kind}: creating a fresh database`);
  const database = await createTestDatabase(kind, "reftrail_bench");
  liveDatabases.add(database);
  try {
    // 1. The organization, its key and one probe reference, through the application's services. The app is then
    //    closed: a raw SQLite connection must not be open beside Prisma's in one process (the adapter bundles its
    //    own better-sqlite3, and two SQLite copies in one process break each other's POSIX locks).
    let app = await startBenchApp(database.url);
    const { organization, apiKey } = await app.services.organizations.createOrganization("bench");
    const probe = await app.services.references.createReference(organization.id, {
      containerId: containerNumber("PRB", 1),
      carrierCode: "MAEU",
      tags: [{ name: "bench-probe" }],
    });
    await app.close();

    // 2. Bulk seeding with raw SQL.
    log(`${kind}: seeding ${settings.tags} tags and ${settings.references} references`);
    const now = Date.now();
    const refs = await seedReferences({
      kind,
      url: database.url,
      organizationId: organization.id,
      tags: settings.tags,
      references: settings.references,
      createdEvents: settings.createdEvents,
      sqliteAnalyze: settings.sqliteAnalyze,
      newestAt: now - 60 * 60_000,
    });
    log(`${kind}: seeded references in ${refs.seconds.toFixed(1)} s; seeding ${settings.events} lifecycle events`);
    // The log ends two hours ago (well inside the retention window) and carries two tags.
    const logTags = await readTags(kind, database.url, organization.id, ["tag-0000", "tag-0001"]);
    const eventLog = await seedEventLog({
      kind,
      url: database.url,
      organizationId: organization.id,
      events: settings.events,
      sqliteAnalyze: settings.sqliteAnalyze,
      firstAt: now - 2 * 60 * 60_000 - settings.events,
      tags: logTags,
    });
    log(`${kind}: seeded the log in ${eventLog.seconds.toFixed(1)} s`);

    let formatCheck = "PostgreSQL columns are typed (timestamp(3), jsonb, boolean)";
    if (kind === "sqlite") {
      const raw = new Sqlite(sqliteFilePath(database.url), { readonly: true });
      try {
        compareShapes(
          "tags",
          sqliteShapes(raw, "tags", "name = ?", ["bench-probe"]),
          sqliteShapes(raw, "tags", "name = ?", ["tag-0000"]),
        );
        compareShapes(
          "shipping_references",
          sqliteShapes(raw, "shipping_references", "id = ?", [probe.id]),
          // A seeded reference that carries tags, as the probe does: an empty tag list has no shape to compare.
          sqliteShapes(
            raw,
            "shipping_references",
            `"id" <> ? AND "id" IN (SELECT "reference_id" FROM "reference_tags")`,
            [probe.id],
          ),
        );
        compareShapes(
          "reference_tags",
          sqliteShapes(raw, "reference_tags", "reference_id = ?", [probe.id]),
          sqliteShapes(raw, "reference_tags", "reference_id <> ?", [probe.id]),
        );
        const written = sqliteShapes(raw, "lifecycle_events", "reference_id = ?", [probe.id]);
        if (settings.createdEvents) {
          compareShapes(
            "lifecycle_events",
            written,
            sqliteShapes(raw, "lifecycle_events", "reference_id <> ? AND reference_id <> ?", [
              probe.id,
              eventLog.referenceId,
            ]),
          );
        }
        const logged = sqliteShapes(raw, "lifecycle_events", "reference_id = ?", [eventLog.referenceId]);
        compareShapes("lifecycle_events", { ...written, detail: logged.detail! }, logged);
        formatCheck =
          "seeded rows match rows written by the services (datetime TEXT +00:00, boolean INTEGER, JSON TEXT)";
      } finally {
        raw.close();
      }
    }
    const seed: SeedReport = {
      tags: settings.tags,
      references: settings.references,
      referenceTagRows: refs.referenceTagRows,
      createdEventRows: refs.eventRows,
      seedReferencesSeconds: refs.seconds,
      events: settings.events,
      seedEventsSeconds: eventLog.seconds,
      formatCheck,
    };

    // 3. The real server.
    app = await startBenchApp(database.url);
    await app.http.listen({ host: "127.0.0.1", port: 0 });
    try {
      const base = baseUrlOf(app);
      const headers = { "X-API-Key": apiKey.key };
      const tagCount = refs.referencesPerTag.get(settings.tag) ?? 0;
      const listing = await benchListing(kind, base, headers, tagCount, eventLog.referenceId);
      // Uncached: part B measures the keyset path through the log, which a repeated request would skip.
      const logRows = await benchLog(
        kind,
        base,
        { ...headers, "Cache-Control": "no-cache" },
        eventLog.referenceId,
        eventLog.occurredAt,
      );
      return { kind, seed, tag: { name: settings.tag, references: tagCount }, listing, log: logRows };
    } finally {
      await app.close();
    }
  } finally {
    await database.drop();
    liveDatabases.delete(database);
  }
}

async function readTags(
  kind: Kind,
  url: string,
  organizationId: string,
  names: string[],
): Promise<{ id: string; name: string }[]> {
  if (kind === "sqlite") {
    const raw = new Sqlite(sqliteFilePath(url), { readonly: true });
    try {
      return names.map(
        (name) =>
          raw.prepare(`SELECT id, name FROM tags WHERE organization_id = ? AND name = ?`).get(organizationId, name) as {
            id: string;
            name: string;
          },
      );
    } finally {
      raw.close();
    }
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ id: string; name: string }>(
      `SELECT id, name FROM tags WHERE organization_id = $1 AND name = ANY($2) ORDER BY name`,
      [organizationId, names],
    );
    return rows;
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Part A: listing references filtered by one tag

async function benchListing(
  kind: Kind,
  base: string,
  headers: Record<string, string>,
  tagCount: number,
  logReferenceId: string,
): Promise<ListingRow[]> {
  const expected = Math.min(50, tagCount);
  const restUrl = `${base}/v1/references?tag_names=${encodeURIComponent(settings.tag)}`;
  const rest = await getJson<{ data: { id: string; tags: { name: string }[] }[]; next_cursor: string | null }>(
    restUrl,
    { headers },
  );
  check(rest.data.length === expected, `REST listing returned ${rest.data.length} references, expected ${expected}`);
  check(
    rest.data.every((r) => r.tags.some((t) => t.name === settings.tag)),
    `REST listing returned a reference without ${settings.tag}`,
  );

  const rows: ListingRow[] = [];
  log(`${kind}: part A, REST GET /v1/references?tag_names=${settings.tag}`);
  rows.push({
    name: `REST GET /v1/references?tag_names=${settings.tag}`,
    result: await measure({ url: restUrl, headers }),
  });

  const graphqlBody = JSON.stringify({ query: GRAPHQL_REFERENCES, variables: { names: [settings.tag] } });
  const graphqlHeaders = { ...headers, "Content-Type": "application/json" };
  const graphqlName = `GraphQL references(first: 50, filter: {tagNames})`;
  try {
    const answer = await getJson<{ data?: { references: { edges: { node: { id: string } }[] } }; errors?: unknown[] }>(
      `${base}/graphql`,
      {
        method: "POST",
        headers: graphqlHeaders,
        body: graphqlBody,
      },
    );
    check(!answer.errors, `GraphQL answered errors: ${JSON.stringify(answer.errors ?? null).slice(0, 500)}`);
    const ids = answer.data!.references.edges.map((edge) => edge.node.id);
    check(
      JSON.stringify(ids) === JSON.stringify(rest.data.map((r) => r.id)),
      "GraphQL and REST return different references for the same filter",
    );
    log(`${kind}: part A, ${graphqlName}`);
    rows.push({
      name: graphqlName,
      result: await measure({ url: `${base}/graphql`, method: "POST", headers: graphqlHeaders, body: graphqlBody }),
    });
  } catch (error) {
    log(`${kind}: GraphQL listing skipped: ${(error as Error).message}`);
    rows.push({ name: graphqlName, result: null, error: (error as Error).message });
  }

  // The issue's rows: a two-tag filtered page of 50, and a reference with its tags and first 50 events.
  const otherTag = `tag-${String((Number(settings.tag.slice(4)) + 1) % settings.tags).padStart(4, "0")}`;
  for (const match of ["any", "all"] as const) {
    const url = `${base}/v1/references?tag_names=${settings.tag}&tag_names=${otherTag}&tag_match=${match}&limit=50`;
    const page = await getJson<{ data: unknown[] }>(url, { headers });
    check(Array.isArray(page.data), `two-tag listing (${match}) answered no page`);
    log(`${kind}: part A, REST two-tag filter (${match})`);
    rows.push({ name: `REST two tags, tag_match=${match} (limit=50)`, result: await measure({ url, headers }) });
  }
  const referenceBody = JSON.stringify({ query: GRAPHQL_REFERENCE_WITH_EVENTS, variables: { id: logReferenceId } });
  const referenceAnswer = await getJson<{ data?: { reference: { events: { edges: unknown[] } } } }>(`${base}/graphql`, {
    method: "POST",
    headers: graphqlHeaders,
    body: referenceBody,
  });
  check(referenceAnswer.data?.reference.events.edges.length === 50, "GraphQL reference: no 50 events");
  log(`${kind}: part A, GraphQL reference(id) { tags events(first: 50) }`);
  rows.push({
    name: "GraphQL reference(id) { tags events(first: 50) }",
    result: await measure({ url: `${base}/graphql`, method: "POST", headers: graphqlHeaders, body: referenceBody }),
  });

  // The rows above repeat one request, so after the first one the read cache answers them (docs/decisions.md,
  // "Read cache"). The same requests with `Cache-Control: no-cache` are computed afresh every time: the data path.
  const uncached = { "Cache-Control": "no-cache" };
  for (const match of ["any", "all"] as const) {
    const url = `${base}/v1/references?tag_names=${settings.tag}&tag_names=${otherTag}&tag_match=${match}&limit=50`;
    log(`${kind}: part A, REST two-tag filter (${match}), uncached`);
    rows.push({
      name: `REST two tags, tag_match=${match}, uncached (no-cache)`,
      result: await measure({ url, headers: { ...headers, ...uncached } }),
    });
  }
  log(`${kind}: part A, GraphQL reference(id) { tags events(first: 50) }, uncached`);
  rows.push({
    name: "GraphQL reference(id) { tags events(first: 50) }, uncached (no-cache)",
    result: await measure({
      url: `${base}/graphql`,
      method: "POST",
      headers: { ...graphqlHeaders, ...uncached },
      body: referenceBody,
    }),
  });

  // Exclusion filters (NOT EXISTS probes of the (reference_id, tag_id) key), next to the inclusion filter above:
  // leaving out the bench tag, and the bench tag's carriers that do not also carry its neighbour tag.
  const neighbour = settings.tag.replace(/\d+$/, (digits) => String(Number(digits) + 1).padStart(digits.length, "0"));
  const exclusions = [
    `exclude_tag_names=${encodeURIComponent(settings.tag)}`,
    `tag_names=${encodeURIComponent(settings.tag)}&exclude_tag_names=${encodeURIComponent(neighbour)}`,
  ];
  for (const exclusion of exclusions) {
    const url = `${base}/v1/references?${exclusion}`;
    const page = await getJson<{ data: { tags: { name: string }[] }[] }>(url, { headers });
    const excludedName = decodeURIComponent(exclusion.split("exclude_tag_names=")[1]!);
    check(page.data.length > 0, `REST ${exclusion} returned no references`);
    check(
      page.data.every((r) => !r.tags.some((t) => t.name === excludedName)),
      `REST ${exclusion} returned a reference carrying ${excludedName}`,
    );
    const name = `REST GET /v1/references?${decodeURIComponent(exclusion)}`;
    log(`${kind}: part A, ${name}`);
    rows.push({ name, result: await measure({ url, headers }) });
  }

  const unfilteredUrl = `${base}/v1/references`;
  log(`${kind}: part A, REST GET /v1/references (no filter, for comparison)`);
  rows.push({ name: "REST GET /v1/references (no filter)", result: await measure({ url: unfilteredUrl, headers }) });
  return rows;
}

// ---------------------------------------------------------------------------------------------------------------
// Part B: one page of a long lifecycle log, at its start, middle and end

interface EventPage {
  data: { id: string; occurred_at: string }[];
  next_cursor: string | null;
}

async function benchLog(
  kind: Kind,
  base: string,
  headers: Record<string, string>,
  referenceId: string,
  occurredAt: (i: number) => string,
): Promise<LogRow[]> {
  const n = settings.events;
  const pageUrl = (query: Record<string, string>) =>
    `${base}/v1/references/${referenceId}/events?${new URLSearchParams({ limit: "50", ...query }).toString()}`;
  const positions: { position: string; from?: number }[] = [
    { position: "start" },
    { position: "middle", from: Math.floor(n / 2) },
    { position: "end", from: n - 100 },
  ];
  const rows: LogRow[] = [];
  for (const { position, from } of positions) {
    const query: Record<string, string> = from === undefined ? {} : { from: occurredAt(from) };
    const firstIndex = from ?? 0;
    const first = await getJson<EventPage>(pageUrl(query), { headers });
    check(first.data.length === 50, `${position}: first page has ${first.data.length} events`);
    check(
      first.data[0]!.occurred_at === occurredAt(firstIndex),
      `${position}: page starts at ${first.data[0]!.occurred_at}, expected ${occurredAt(firstIndex)}`,
    );
    check(first.next_cursor, `${position}: no next_cursor`);
    const label = from === undefined ? "(no filter)" : `from=<event #${from.toLocaleString("en-US")}>`;
    log(`${kind}: part B, ${position} ${label}`);
    rows.push({ position, query: label, result: await measureSequential(pageUrl(query), headers) });

    const nextUrl = pageUrl({ ...query, cursor: first.next_cursor });
    const next = await getJson<EventPage>(nextUrl, { headers });
    check(next.data.length === 50, `${position}: next page has ${next.data.length} events`);
    check(
      next.data[0]!.occurred_at === occurredAt(firstIndex + 50),
      `${position}: next page starts at ${next.data[0]!.occurred_at}`,
    );
    if (position === "end") check(next.next_cursor === null, "end: the last page still has a next_cursor");
    rows.push({
      position: `${position} → next page`,
      query: `${label} + cursor`,
      result: await measureSequential(nextUrl, headers),
    });
  }
  const newestUrl = pageUrl({ order: "desc" });
  const newest = await getJson<EventPage>(newestUrl, { headers });
  check(newest.data[0]!.occurred_at === occurredAt(n - 1), "order=desc does not start at the newest event");
  log(`${kind}: part B, newest first (order=desc)`);
  rows.push({ position: "newest (desc)", query: "order=desc", result: await measureSequential(newestUrl, headers) });
  return rows;
}

// ---------------------------------------------------------------------------------------------------------------
// Output

const fmtMs = (ms: number) =>
  Number.isNaN(ms) ? "—" : ms < 10 ? ms.toFixed(2) : ms < 100 ? ms.toFixed(1) : ms.toFixed(0);
const fmtLoad = (load: number[]) => load.map((l) => l.toFixed(2)).join("/");
const fmtInt = (n: number) => Math.round(n).toLocaleString("en-US");
const fmtRatio = (r: number) => (Number.isFinite(r) ? `${r < 0.1 ? r.toFixed(3) : r.toFixed(2)}×` : "—");

function table(headers: string[], rows: string[][], rightAligned: boolean[] = []): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (rightAligned[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(" | ")} |`;
  const rule = `|${widths.map((w, i) => (rightAligned[i] ? `${"-".repeat(w + 1)}:` : "-".repeat(w + 2))).join("|")}|`;
  return [line(headers), rule, ...rows.map(line)].join("\n");
}

function notes(result: LoadResult): string {
  const problems: string[] = [];
  if (result.non2xx) problems.push(`${result.non2xx} non-2xx`);
  if (result.errors) problems.push(`${result.errors} errors`);
  if (result.timeouts) problems.push(`${result.timeouts} timeouts`);
  // Opening the connections to a server under load (one accepted per event-loop turn): slow when requests are.
  if (result.rampSeconds !== undefined && result.rampSeconds >= 0.5)
    problems.push(`connections all served after ${result.rampSeconds.toFixed(1)} s`);
  return problems.join(", ");
}

// ---------------------------------------------------------------------------------------------------------------
// Main

/** Parts A and B: seed each database, measure, print the tables and write BENCH_OUTPUT. */
export async function runCachedReads(): Promise<void> {
  log(
    `databases=${settings.databases.join(",")} tags=${settings.tags} references=${settings.references} events=${settings.events} ` +
      `duration=${settings.durationSeconds}s connections=${settings.connections}`,
  );
  const baseline = await startBaseline();
  let hello: LoadResult;
  let fastifyHello: LoadResult;
  try {
    log("baseline: Apollo Server hello world (POST /graphql { hello })");
    hello = await measure({
      url: `${baseline.url}/graphql`,
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: HELLO_QUERY,
    });
    log("baseline: Fastify hello world (GET /hello)");
    fastifyHello = await measure({ url: `${baseline.url}/hello` });
  } finally {
    await baseline.close();
  }

  const reports: DatabaseReport[] = [];
  for (const kind of settings.databases) reports.push(await benchDatabase(kind));
  const totalSeconds = (performance.now() - runStarted) / 1000;

  // -- Print
  const out: string[] = [];
  out.push(
    `reftrail benchmark — ${new Date().toISOString()} — Node ${process.version}, ${cpus().length} CPU(s) (${cpus()[0]?.model ?? "?"})`,
    `sizes: ${fmtInt(settings.tags)} tags, ${fmtInt(settings.references)} references (0–3 tags each), ` +
      `${fmtInt(settings.events)} lifecycle events on one reference; load: ${settings.connections} connections × ` +
      `${settings.durationSeconds} s after ${settings.warmupSeconds} s warm-up; latencies in ms`,
    "",
    "Seeding (raw SQL, batched, in transactions; secondary indexes rebuilt after the load)",
    table(
      [
        "database",
        "tags",
        "references",
        "reference_tags",
        "created events",
        "seed refs (s)",
        "log events",
        "seed log (s)",
        "format check",
      ],
      reports.map((r) => [
        r.kind,
        fmtInt(r.seed.tags),
        fmtInt(r.seed.references),
        fmtInt(r.seed.referenceTagRows),
        fmtInt(r.seed.createdEventRows),
        r.seed.seedReferencesSeconds.toFixed(1),
        fmtInt(r.seed.events),
        r.seed.seedEventsSeconds.toFixed(1),
        r.seed.formatCheck,
      ]),
      [false, true, true, true, true, true, true, true, false],
    ),
    "",
    `Part A — list references filtered by one tag (${reports[0]?.tag.name ?? settings.tag}, carried by ` +
      `${reports.map((r) => `${fmtInt(r.tag.references)} on ${r.kind}`).join(", ")} of ${fmtInt(settings.references)}); ratios are ours / Apollo hello world`,
  );
  const helloRow = (name: string, r: LoadResult) => [
    "—",
    name,
    fmtInt(r.rps),
    fmtMs(r.p50),
    fmtMs(r.p99),
    "1.00×",
    "1.00×",
    "1.00×",
    notes(r),
  ];
  const listingRows: string[][] = [
    helloRow("Apollo hello world (POST /graphql { hello })", hello),
    helloRow("Fastify hello world (GET /hello)", fastifyHello),
  ];
  listingRows[1]![5] = fmtRatio(fastifyHello.rps / hello.rps);
  listingRows[1]![6] = fmtRatio(fastifyHello.p50 / hello.p50);
  listingRows[1]![7] = fmtRatio(fastifyHello.p99 / hello.p99);
  for (const report of reports) {
    for (const row of report.listing) {
      if (!row.result) {
        listingRows.push([
          report.kind,
          row.name,
          "—",
          "—",
          "—",
          "—",
          "—",
          "—",
          `not measured: ${row.error?.slice(0, 80)}`,
        ]);
        continue;
      }
      const r = row.result;
      listingRows.push([
        report.kind,
        row.name,
        fmtInt(r.rps),
        fmtMs(r.p50),
        fmtMs(r.p99),
        fmtRatio(r.rps / hello.rps),
        fmtRatio(r.p50 / hello.p50),
        fmtRatio(r.p99 / hello.p99),
        notes(r),
      ]);
    }
  }
  out.push(
    table(
      ["database", "endpoint", "req/s", "p50", "p99", "req/s ratio", "p50 ratio", "p99 ratio", "notes"],
      listingRows,
      [false, false, true, true, true, true, true, true, false],
    ),
    "",
    `Part B — one 50-event page of GET /v1/references/{id}/events, ${fmtInt(settings.events)} events on the reference, sequential requests`,
  );
  const logRows: string[][] = [];
  for (const report of reports) {
    for (const row of report.log) {
      logRows.push([
        report.kind,
        row.position,
        row.query,
        fmtInt(row.result.requests),
        fmtMs(row.result.p50),
        fmtMs(row.result.p99),
        notes(row.result),
      ]);
    }
    const at = (position: string) => report.log.find((row) => row.position === position)!.result;
    const ratio = (a: string, b: string) => `${fmtRatio(at(a).p50 / at(b).p50)} / ${fmtRatio(at(a).p99 / at(b).p99)}`;
    logRows.push([report.kind, "ratio end / start", "p50 / p99", "", ratio("end", "start"), "", ""]);
    logRows.push([
      report.kind,
      "ratio end / start, next page",
      "p50 / p99",
      "",
      ratio("end → next page", "start → next page"),
      "",
      "",
    ]);
  }
  out.push(
    table(["database", "position", "query", "requests", "p50", "p99", "notes"], logRows, [
      false,
      false,
      false,
      true,
      true,
      true,
      false,
    ]),
    "",
    `total run time: ${totalSeconds.toFixed(0)} s; load average (1/5/15 min) at start ${fmtLoad(loadAtStart)}, at end ${fmtLoad(loadavg())} ` +
      `(figures are only comparable between quiet runs: other processes on the machine skew them)`,
  );
  console.log(out.join("\n"));

  writeFileSync(
    settings.output,
    `${JSON.stringify(
      {
        at: new Date().toISOString(),
        node: process.version,
        cpus: cpus().length,
        settings: { ...settings, adminUrl: undefined },
        baselines: { apolloHelloWorld: hello, fastifyHelloWorld: fastifyHello },
        databases: reports,
        totalSeconds,
      },
      null,
      2,
    )}\n`,
  );
  log(`results written to ${settings.output}`);
  await loadGenerator.close();
}
