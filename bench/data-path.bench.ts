/*
 * The headline of `npm run bench` (part `data`): what a user meets beneath the read cache. Every request asks
 * for a random reference or a random pair of tags with `Cache-Control: no-cache`, so no answer is ever served
 * from the cache. The anchors (Apollo hello, Fastify hello) run just before and just after each database's
 * rows, and ratios are taken to their mean. The servers run in child processes (bench/server-child.ts), so
 * that each peak RSS is the server's own.
 *
 * Rows per database and size: GraphQL `reference(id)` with its tags and first 20 events; REST two-tag `any`
 * page of 50; GraphQL `references(filter: {tagNames, tagMatch: ANY}, first: 50)`; the two GraphQL rows on a server
 * without its cost budget and on one with traces on, each in rounds paired with the default server
 * (bench/data-path.variants.ts); then the first two again
 * while an open-loop feed POSTs extraction outcomes at BENCH_FEED_RATE per second into random references
 * (bench/feed-worker.mjs), whose write latency is reported beside them (the feed first runs alone for the warm-up
 * and a second, unmeasured, so that the write path is warm as the reads are); then the database time of one page
 * (bench/statement-time.ts). Settings: see bench/run.ts.
 */
import type { LoadGenerator, LoadResult, LoadSpec } from "./load.ts";
import { seedDataPath, type SeededData } from "./data-seed.ts";
import { WriteFeed, type FeedResult } from "./feed.ts";
import { startAnchorsChild, startReftrailChild, type ServerChild } from "./server-child.ts";
import { HELLO_QUERY } from "./baseline.ts";
import { startBenchApp } from "./bench-app.ts";
import { createTestDatabase, type TestDatabase } from "../test/support/test-server.ts";
import { BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";
import { measureStatementTime, type StatementTiming, type TimedRequest } from "./statement-time.ts";
import type { Kind } from "./seed.ts";
import { VARIANTS, variantRows, type VariantOf } from "./data-path.variants.ts";

export interface DataPathSettings {
  readonly databases: readonly Kind[];
  /** Each database is seeded and measured at each of these sizes. */
  readonly scales: readonly number[];
  readonly tags: number;
  readonly eventsPerReference: number;
  readonly connections: number;
  readonly durationSeconds: number;
  readonly warmupSeconds: number;
  readonly feedRate: number;
  /** Whether to run the mixed rows (reads while the feed writes). */
  readonly mixed: boolean;
  /** Whether to run the GraphQL fresh rows with traces on (issue 37: an in-memory exporter). */
  readonly tracing: boolean;
  /** Whether to run the GraphQL fresh rows without the cost budget (issue 37: the budget's share). */
  readonly budgetOff: boolean;
  /** Rounds of each variant row, each a default run and a variant run back to back. */
  readonly variantRounds: number;
}

export const GRAPHQL_REFERENCE = `query BenchReference($id: ID!) {
  reference(id: $id) {
    tags { id name }
    events(first: 20) { edges { cursor node { id type occurredAt detail } } pageInfo { hasNextPage endCursor } }
  }
}`;

export const GRAPHQL_TWO_TAG_PAGE = `query BenchTwoTags($names: [String!]) {
  references(filter: { tagNames: $names, tagMatch: ANY }, first: 50) {
    edges { cursor node { id containerId carrierCode tags { id name } } }
    pageInfo { hasNextPage endCursor }
  }
}`;

export interface Row {
  readonly name: string;
  /** `apollo` (GraphQL rows) or `fastify` (REST rows): the anchor its ratio is taken to. */
  readonly anchor: "apollo" | "fastify";
  readonly result: LoadResult;
  /** The feed's writes during this row (mixed rows only). */
  readonly feed?: FeedResult;
  /** A variant row (bench/data-path.variants.ts): the default row it prices a feature against. */
  readonly variantOf?: VariantOf;
}

export interface ScaleReport {
  readonly kind: Kind;
  readonly references: number;
  readonly seed: Omit<SeededData, "referenceIds" | "tagNames">;
  /** Each anchor measured before and after the rows; ratios are taken to the mean req/s of the two. */
  readonly anchors: {
    readonly apollo: readonly [LoadResult, LoadResult];
    readonly fastify: readonly [LoadResult, LoadResult];
    readonly peakRssMiB: number;
  };
  readonly rows: Row[];
  readonly peakRssMiB: { readonly reads: number; readonly mixed: number };
  readonly statementTimes: StatementTiming[];
}

const log = (message: string) => process.stderr.write(`[bench:data] ${message}\n`);

/** Every pair of distinct tag names: the random keys of the two-tag rows. */
export function tagPairs(names: readonly string[]): [string, string][] {
  const pairs: [string, string][] = [];
  for (let a = 0; a < names.length; a++) for (let b = a + 1; b < names.length; b++) pairs.push([names[a]!, names[b]!]);
  return pairs;
}

/** At most `max` ids picked evenly across the seeded ones: the random keys each load chooses from. */
export function sampleIds(ids: readonly string[], max = 10_000): string[] {
  if (ids.length <= max) return [...ids];
  const step = ids.length / max;
  return Array.from({ length: max }, (_, i) => ids[Math.floor(i * step)]!);
}

export function restTwoTagPath(a: string, b: string): string {
  return `/v1/references?tag_names=${encodeURIComponent(a)}&tag_names=${encodeURIComponent(b)}&tag_match=any&limit=50`;
}

async function answer(url: string, init: RequestInit): Promise<any> {
  const response = await fetch(url, init);
  const text = await response.text();
  if (!response.ok) throw new Error(`${init.method ?? "GET"} ${url} -> ${response.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

function check(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`data path bench sanity check failed: ${message}`);
}

/** The three reads, each with its random keys; checked once against the server before they are measured. */
export async function readSpecs(base: string, apiKey: string, seeded: SeededData) {
  const headers = { "X-API-Key": apiKey, "Cache-Control": "no-cache" };
  const graphqlHeaders = { ...headers, "Content-Type": "application/json" };
  const ids = sampleIds(seeded.referenceIds);
  const pairs = tagPairs(seeded.tagNames);
  const referenceBody = (id: string) => JSON.stringify({ query: GRAPHQL_REFERENCE, variables: { id } });
  const pageBody = (pair: readonly string[]) =>
    JSON.stringify({ query: GRAPHQL_TWO_TAG_PAGE, variables: { names: pair } });

  const one = await answer(`${base}/graphql`, {
    method: "POST",
    headers: graphqlHeaders,
    body: referenceBody(ids[0]!),
  });
  check(!one.errors, `GraphQL reference answered ${JSON.stringify(one.errors)}`);
  check(one.data.reference.tags.length === 2, "a reference does not carry 2 tags");
  check(one.data.reference.events.edges.length === 20, "a reference does not answer 20 events");
  const [a, b] = pairs[0]!;
  const rest = await answer(`${base}${restTwoTagPath(a, b)}`, { headers });
  check(rest.data.length === 50, `the two-tag page holds ${rest.data.length} references, not 50`);
  check(
    rest.data.every((r: { tags: { name: string }[] }) => r.tags.some((t) => t.name === a || t.name === b)),
    "the two-tag page holds a reference with neither tag",
  );
  const page = await answer(`${base}/graphql`, { method: "POST", headers: graphqlHeaders, body: pageBody([a, b]) });
  check(!page.errors, `GraphQL references answered ${JSON.stringify(page.errors)}`);
  check(
    JSON.stringify(page.data.references.edges.map((e: { node: { id: string } }) => e.node.id)) ===
      JSON.stringify(rest.data.map((r: { id: string }) => r.id)),
    "GraphQL and REST answer different pages for one tag pair",
  );

  const reference: Omit<LoadSpec, "connections"> = {
    url: `${base}/graphql`,
    method: "POST",
    headers: graphqlHeaders,
    variants: ids.map((id) => ({ path: "/graphql", body: referenceBody(id) })),
  };
  const restPage: Omit<LoadSpec, "connections"> = {
    url: `${base}/v1/references`,
    headers,
    variants: pairs.map(([x, y]) => ({ path: restTwoTagPath(x, y) })),
  };
  const graphqlPage: Omit<LoadSpec, "connections"> = {
    url: `${base}/graphql`,
    method: "POST",
    headers: graphqlHeaders,
    variants: pairs.map((pair) => ({ path: "/graphql", body: pageBody(pair) })),
  };
  return { reference, restPage, graphqlPage };
}

/** One request of each read, after a warm-up request with other keys, for bench/statement-time.ts. */
function timedRequests(seeded: SeededData): TimedRequest[] {
  const [first, second] = tagPairs(seeded.tagNames);
  const referenceBody = (id: string) => JSON.stringify({ query: GRAPHQL_REFERENCE, variables: { id } });
  const pageBody = (pair: readonly string[]) =>
    JSON.stringify({ query: GRAPHQL_TWO_TAG_PAGE, variables: { names: pair } });
  const ids = seeded.referenceIds;
  return [
    {
      name: ROW_NAMES.reference,
      method: "POST",
      warmup: { path: "/graphql", body: referenceBody(ids[0]!) },
      measured: { path: "/graphql", body: referenceBody(ids[Math.floor(ids.length / 2)]!) },
    },
    {
      name: ROW_NAMES.restPage,
      method: "GET",
      warmup: { path: restTwoTagPath(...first!) },
      measured: { path: restTwoTagPath(...second!) },
    },
    {
      name: ROW_NAMES.graphqlPage,
      method: "POST",
      warmup: { path: "/graphql", body: pageBody(first!) },
      measured: { path: "/graphql", body: pageBody(second!) },
    },
  ];
}

export const ROW_NAMES = {
  reference: "GraphQL reference(id) { tags events(first: 20) }",
  restPage: "REST /v1/references two tags, any, limit=50",
  graphqlPage: "GraphQL references(tagNames: [A,B], tagMatch: ANY, first: 50)",
} as const;

export async function runDataPathBench(settings: DataPathSettings, loads: LoadGenerator): Promise<ScaleReport[]> {
  const measure = (spec: Omit<LoadSpec, "connections">) =>
    loads.run({
      ...spec,
      connections: settings.connections,
      durationSeconds: settings.durationSeconds,
      warmupSeconds: settings.warmupSeconds,
    });
  const reports: ScaleReport[] = [];
  for (const kind of settings.databases) {
    for (const references of settings.scales) {
      reports.push(await benchScale(kind, references, settings, measure));
    }
  }
  return reports;
}

/** A fresh database with the bench organization (through the services) and the seeded data (raw SQL). */
export async function prepareDatabase(
  kind: Kind,
  references: number,
  settings: Pick<DataPathSettings, "tags" | "eventsPerReference">,
): Promise<{ database: TestDatabase; organizationId: string; apiKey: string; seeded: SeededData }> {
  log(`${kind} × ${references.toLocaleString("en-US")}: creating a fresh database`);
  const database = await createTestDatabase(kind, "reftrail_bench");
  try {
    // The app is closed before raw SQL seeds the rest (two SQLite connections in one process break each
    // other's locks).
    const setup = await startBenchApp(database.url, { WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY });
    const { organization, apiKey } = await setup.services.organizations.createOrganization("bench-data");
    await setup.close();
    log(
      `${kind}: seeding ${references} references × 2 of ${settings.tags} tags × ${settings.eventsPerReference} events`,
    );
    const seeded = await seedDataPath({
      kind,
      url: database.url,
      organizationId: organization.id,
      references,
      tags: settings.tags,
      eventsPerReference: settings.eventsPerReference,
      newestAt: Date.now() - 60 * 60_000,
    });
    log(`${kind}: seeded in ${seeded.seconds.toFixed(1)} s`);
    return { database, organizationId: organization.id, apiKey: apiKey.key, seeded };
  } catch (error) {
    await database.drop();
    throw error;
  }
}

/** One measurement of both anchors on their (already running) child process. */
async function measureAnchors(
  anchors: ServerChild,
  measure: (spec: Omit<LoadSpec, "connections">) => Promise<LoadResult>,
): Promise<{ apollo: LoadResult; fastify: LoadResult }> {
  const apollo = await measure({
    url: `${anchors.url}/graphql`,
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: HELLO_QUERY,
  });
  return { apollo, fastify: await measure({ url: `${anchors.url}/hello` }) };
}

async function benchScale(
  kind: Kind,
  references: number,
  settings: DataPathSettings,
  measure: (spec: Omit<LoadSpec, "connections">) => Promise<LoadResult>,
): Promise<ScaleReport> {
  const { database, apiKey, seeded } = await prepareDatabase(kind, references, settings);
  const anchorsChild = await startAnchorsChild();
  try {
    // The anchors run before and after the database's rows, and each ratio is taken to their mean: the machine
    // is shared, and its speed drifts within minutes.
    log(`${kind}: anchors (before)`);
    anchorsChild.resetPeak();
    const anchorsBefore = await measureAnchors(anchorsChild, measure);
    const anchorsPeak = anchorsChild.peakRssMiB();

    const server = await startReftrailChild(database.url, { WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY });
    const rows: Row[] = [];
    let peakReads = Number.NaN;
    let peakMixed = Number.NaN;
    try {
      const specs = await readSpecs(server.url, apiKey, seeded);
      server.resetPeak();
      for (const [key, anchor] of [
        ["reference", "apollo"],
        ["restPage", "fastify"],
        ["graphqlPage", "apollo"],
      ] as const) {
        log(`${kind}: ${ROW_NAMES[key]}, fresh`);
        rows.push({ name: `${ROW_NAMES[key]}, fresh`, anchor, result: await measure(specs[key]) });
      }
      peakReads = server.peakRssMiB();
      // The same GraphQL reads on servers that differ by one feature, right after (bench/data-path.variants.ts).
      const reads = {
        keys: ["reference", "graphqlPage"] as const,
        defaultSpecs: specs,
        specsOn: (url: string) => readSpecs(url, apiKey, seeded),
        defaultName: (key: "reference" | "graphqlPage") => `${ROW_NAMES[key]}, fresh`,
      };
      const variants = [
        ...(settings.budgetOff ? [VARIANTS.budgetOff] : []),
        ...(settings.tracing ? [VARIANTS.traced] : []),
      ];
      for (const variant of variants) {
        rows.push(...(await variantRows(variant, database.url, reads, settings.variantRounds, measure, log, kind)));
      }
      if (settings.mixed) {
        server.resetPeak();
        rows.push(...(await mixedRows(server, apiKey, seeded, specs, settings, measure, kind)));
        peakMixed = server.peakRssMiB();
      }
    } finally {
      await server.stop();
    }
    log(`${kind}: anchors (after)`);
    const anchorsAfter = await measureAnchors(anchorsChild, measure);
    await anchorsChild.stop();
    log(`${kind}: database time of one request`);
    const statementTimes = await measureStatementTime(kind, database.url, apiKey, timedRequests(seeded));
    const { referenceIds: _ids, tagNames: _names, ...seed } = seeded;
    return {
      kind,
      references,
      seed,
      anchors: {
        apollo: [anchorsBefore.apollo, anchorsAfter.apollo],
        fastify: [anchorsBefore.fastify, anchorsAfter.fastify],
        peakRssMiB: anchorsPeak,
      },
      rows,
      peakRssMiB: { reads: peakReads, mixed: peakMixed },
      statementTimes,
    };
  } finally {
    await anchorsChild.stop();
    await database.drop();
  }
}

async function mixedRows(
  server: ServerChild,
  apiKey: string,
  seeded: SeededData,
  specs: Awaited<ReturnType<typeof readSpecs>>,
  settings: DataPathSettings,
  measure: (spec: Omit<LoadSpec, "connections">) => Promise<LoadResult>,
  kind: Kind,
): Promise<Row[]> {
  const feed = new WriteFeed();
  const rows: Row[] = [];
  try {
    const feedSpec = {
      origin: server.url,
      paths: sampleIds(seeded.referenceIds).map((id) => `/v1/references/${id}/extractions`),
      headers: { "X-API-Key": apiKey, "Content-Type": "application/json" },
      body: JSON.stringify({ status: "succeeded" }),
      ratePerSecond: settings.feedRate,
    };
    await feed.warm(feedSpec, settings.warmupSeconds + 1);
    for (const [key, anchor] of [
      ["reference", "apollo"],
      ["restPage", "fastify"],
    ] as const) {
      log(`${kind}: ${ROW_NAMES[key]}, fresh, with the feed`);
      await feed.start(feedSpec);
      const outcome = await measure(specs[key]).then(
        (result) => ({ result }),
        (error: unknown) => ({ error }),
      );
      const feedResult = await feed.stop();
      if (!("result" in outcome)) throw outcome.error;
      const { result } = outcome;
      rows.push({
        name: `${ROW_NAMES[key]}, fresh, + ${settings.feedRate} writes/s`,
        anchor,
        result,
        feed: feedResult,
      });
    }
  } finally {
    await feed.close();
  }
  return rows;
}
