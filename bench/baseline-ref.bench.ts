/*
 * Part `baseline` of `npm run bench`: this checkout against an older commit (BENCH_BASELINE_REF, by default the
 * main of the round before), in the same run, builds alternating, so that a regression against the last round
 * cannot hide behind a comparison made on another day or against a commit from the middle of a round.
 *
 * The older commit is checked out beside this one (a detached git worktree in the system's temp folder, installed
 * with its own lockfile once and kept for later runs). Each side seeds its own database with its own code (its
 * own schema and seeder; the seeder is deterministic, so both hold the same organization), and serves it in a
 * child process of its own. Per database, rounds alternate which side goes first; each row is an honest read
 * (random keys, `Cache-Control: no-cache`): the GraphQL reference with its tags and 20 events, and the REST two-tag
 * page of 50. The anchors (Apollo hello, Fastify hello) are measured at the start and the end.
 *
 * Then the pipeline's stages (src/pipeline/stage-timings.ts) on this checkout's server: microseconds of the main
 * thread per request and stage, under the same GraphQL load (the "execute" stage is wall time, awaits included).
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import pg from "pg";
import type { LoadGenerator, LoadResult, LoadSpec } from "./load.ts";
import { prepareDatabase, readSpecs, ROW_NAMES, sampleIds } from "./data-path.bench.ts";
import type { SeededData } from "./data-seed.ts";
import { HELLO_QUERY } from "./baseline.ts";
import { WriteFeed } from "./feed.ts";
import { fmtInt, fmtRatio, table } from "./report-format.ts";
import { startAnchorsChild, startReftrailChild, startServerChild, type ServerChild } from "./server-child.ts";
import type { Kind } from "./seed.ts";
import { BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";

export interface BaselineSettings {
  readonly ref: string;
  readonly databases: readonly Kind[];
  readonly references: number;
  readonly tags: number;
  readonly eventsPerReference: number;
  readonly connections: number;
  readonly durationSeconds: number;
  readonly warmupSeconds: number;
  readonly rounds: number;
  /** Extraction outcomes a second the feed rows POST beside the saturating GraphQL reads; 0: no feed rows. */
  readonly feedRate: number;
}

/** The main of the round before this one (issue 47's comparison). */
export const DEFAULT_BASELINE_REF = "4040ab0";

const REPOSITORY = join(import.meta.dirname, "..");
const log = (message: string) => process.stderr.write(`[bench:baseline] ${message}\n`);

/** A checkout of `ref` beside this one, installed and built; reused by later runs. */
function baselineCheckout(ref: string): { sha: string; dir: string } {
  const sha = execFileSync("git", ["rev-parse", `${ref}^{commit}`], { cwd: REPOSITORY, encoding: "utf8" }).trim();
  const dir = join(tmpdir(), `reftrail-baseline-${sha.slice(0, 12)}`);
  if (!existsSync(join(dir, "dist", ".build-stamp"))) {
    if (!existsSync(join(dir, "package.json"))) {
      log(`checking out ${sha.slice(0, 12)} into ${dir}`);
      rmSync(dir, { recursive: true, force: true });
      execFileSync("git", ["worktree", "add", "--detach", "--force", dir, sha], { cwd: REPOSITORY, stdio: "inherit" });
    }
    log(`installing ${sha.slice(0, 12)} (npm ci, once)`);
    // With its development dependencies (its build needs them): the bench itself runs with NODE_ENV=production.
    execFileSync("npm", ["ci", "--no-audit", "--no-fund", "--include=dev"], {
      cwd: dir,
      env: { ...process.env, NODE_ENV: "development" },
      stdio: ["ignore", "ignore", "inherit"],
    });
  }
  return { sha, dir };
}

interface Side {
  readonly label: string;
  readonly url: string;
  readonly apiKey: string;
  readonly seeded: SeededData;
  readonly server: ServerChild;
  drop(): Promise<void>;
}

/** Seeds a database with the baseline's own code, in a process of its own (its schema, its seeder). */
async function prepareBaselineSide(
  dir: string,
  kind: Kind,
  settings: BaselineSettings,
): Promise<Omit<Side, "server" | "label">> {
  const out = mkdtempSync(join(tmpdir(), "reftrail-baseline-seed-"));
  const resultFile = join(out, "seeded.json");
  const script = `
    const bench = await import(${JSON.stringify(pathToFileURL(join(dir, "bench/data-path.bench.ts")).href)});
    const { writeFileSync } = await import("node:fs");
    const prepared = await bench.prepareDatabase(${JSON.stringify(kind)}, ${settings.references},
      { tags: ${settings.tags}, eventsPerReference: ${settings.eventsPerReference} });
    const seeded = { ...prepared.seeded, referenceIds: bench.sampleIds(prepared.seeded.referenceIds) };
    writeFileSync(${JSON.stringify(resultFile)}, JSON.stringify({ url: prepared.database.url, apiKey: prepared.apiKey, seeded }));
    process.exit(0);`;
  await new Promise<void>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      cwd: dir,
      env: { ...process.env, NODE_ENV: "production", WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY },
      stdio: ["ignore", "ignore", "inherit"],
    });
    child.once("exit", (code) => (code === 0 ? resolve() : reject(new Error(`baseline seeding exited with ${code}`))));
  });
  const { url, apiKey, seeded } = JSON.parse(readFileSync(resultFile, "utf8")) as {
    url: string;
    apiKey: string;
    seeded: SeededData;
  };
  rmSync(out, { recursive: true, force: true });
  return { url, apiKey, seeded, drop: () => dropDatabase(url) };
}

/** Removes a database the baseline's seeder made (a SQLite file's folder, or a PostgreSQL database). */
async function dropDatabase(url: string): Promise<void> {
  if (url.startsWith("file:")) {
    rmSync(join(url.slice("file:".length), ".."), { recursive: true, force: true });
    return;
  }
  const name = new URL(url).pathname.slice(1);
  const admin = new pg.Client({
    connectionString: process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres",
  });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

export interface BaselineRow {
  readonly kind: Kind;
  readonly row: string;
  /** req/s of this checkout and of the baseline, per round. */
  readonly current: readonly number[];
  readonly baseline: readonly number[];
}

/** A write feed's latency beside saturating reads, per round, on each side. */
export interface FeedRow {
  readonly kind: Kind;
  readonly reads: string;
  readonly current: readonly FeedRound[];
  readonly baseline: readonly FeedRound[];
}

export interface FeedRound {
  /** The reads' req/s while the feed wrote. */
  readonly readsPerSecond: number;
  /** The feed's latency, ms, from each write's scheduled time (no coordinated omission). */
  readonly p50: number;
  readonly p99: number;
  /** Writes answered with something other than 2xx, or not at all. */
  readonly failed: number;
}

export interface StageRow {
  readonly kind: Kind;
  readonly stage: string;
  readonly count: number;
  readonly meanMicroseconds: number;
}

export interface BaselineReport {
  readonly ref: string;
  readonly sha: string;
  readonly anchors: Record<Kind, { readonly apollo: readonly number[]; readonly fastify: readonly number[] }>;
  readonly rows: BaselineRow[];
  readonly feeds: FeedRow[];
  readonly stages: StageRow[];
}

export async function runBaselineBench(settings: BaselineSettings, loads: LoadGenerator): Promise<BaselineReport> {
  const { sha, dir } = baselineCheckout(settings.ref);
  const measure = (spec: Omit<LoadSpec, "connections">): Promise<LoadResult> =>
    loads.run({
      ...spec,
      connections: settings.connections,
      durationSeconds: settings.durationSeconds,
      warmupSeconds: settings.warmupSeconds,
    });
  const rows: BaselineRow[] = [];
  const feeds: FeedRow[] = [];
  const stages: StageRow[] = [];
  const feed = new WriteFeed();
  const anchors = {} as BaselineReport["anchors"];
  for (const kind of settings.databases) {
    const anchorChild = await startAnchorsChild();
    const anchorRuns = { apollo: [] as number[], fastify: [] as number[] };
    const measureAnchors = async () => {
      const apollo = await measure({
        url: `${anchorChild.url}/graphql`,
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: HELLO_QUERY,
      });
      anchorRuns.apollo.push(apollo.rps);
      anchorRuns.fastify.push((await measure({ url: `${anchorChild.url}/hello` })).rps);
    };
    const sides: Side[] = [];
    try {
      await measureAnchors();
      const current = await prepareDatabase(kind, settings.references, settings);
      sides.push({
        label: "current",
        url: current.database.url,
        apiKey: current.apiKey,
        seeded: current.seeded,
        server: await startReftrailChild(current.database.url, {
          WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY,
          BENCH_STAGE_TIMINGS: "1",
        }),
        drop: () => current.database.drop(),
      });
      log(`${kind}: seeding the baseline's database with its own code`);
      const base = await prepareBaselineSide(dir, kind, settings);
      sides.push({
        ...base,
        label: "baseline",
        server: await startServerChild(join(dir, "bench", "server-process.ts"), ["reftrail", base.url], {
          cwd: dir,
          env: { BENCH_SERVER_ENV: JSON.stringify({ WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY }) },
          execArgv: ["--import", "tsx"],
        }),
      });
      const specsOf = new Map<Side, Awaited<ReturnType<typeof readSpecs>>>();
      for (const side of sides) {
        const seeded = { ...side.seeded, referenceIds: sampleIds(side.seeded.referenceIds) };
        specsOf.set(side, await readSpecs(side.server.url, side.apiKey, seeded));
      }
      const wanted = [
        [ROW_NAMES.reference, "reference"],
        [ROW_NAMES.restPage, "restPage"],
      ] as const;
      const results = new Map<string, { current: number[]; baseline: number[] }>(
        wanted.map(([name]) => [name, { current: [], baseline: [] }]),
      );
      for (let round = 0; round < settings.rounds; round++) {
        const order = round % 2 === 0 ? sides : [...sides].reverse();
        for (const side of order) {
          for (const [name, spec] of wanted) {
            const result = await measure(specsOf.get(side)![spec]);
            results.get(name)![side.label as "current" | "baseline"].push(result.rps);
            log(`${kind} round ${round + 1} ${side.label}: ${name} ${fmtInt(result.rps)} req/s`);
          }
        }
      }
      for (const [row, figures] of results) rows.push({ kind, row, ...figures });
      if (settings.feedRate > 0) feeds.push(await feedRounds(kind, sides, specsOf, settings, feed, measure));
      // The stages of this checkout's server, one request at a time (no request waits for another, so each
      // stage's time is its own: the main thread's, and its database round trip where it has one).
      const timed = sides[0]!;
      await timed.server.takeStageTimings?.();
      const stageRun = await loads.run({
        ...specsOf.get(timed)!.reference,
        connections: 1,
        durationSeconds: settings.durationSeconds,
        warmupSeconds: settings.warmupSeconds,
      });
      const timings = (await timed.server.takeStageTimings?.()) ?? [];
      for (const timing of timings) {
        // Per request: a stage that runs for some requests only (admit: queries) is spread over all of them.
        stages.push({
          kind,
          stage: timing.stage,
          count: timing.count,
          meanMicroseconds: (timing.meanMicroseconds * timing.count) / Math.max(1, stageRun.requests),
        });
      }
      await measureAnchors();
      anchors[kind] = anchorRuns;
    } finally {
      for (const side of sides) {
        await side.server.stop();
        await side.drop();
      }
      await anchorChild.stop();
    }
  }
  await feed.close();
  return { ref: settings.ref, sha, anchors, rows, feeds, stages };
}

/**
 * The GraphQL reference row again on each side, rounds alternating, while an open-loop feed POSTs extraction
 * outcomes into random references of that side (as the data part's mixed rows): what a write waits for while
 * reads saturate the server, on both builds in the same run.
 */
async function feedRounds(
  kind: Kind,
  sides: readonly Side[],
  specsOf: ReadonlyMap<Side, Awaited<ReturnType<typeof readSpecs>>>,
  settings: BaselineSettings,
  feed: WriteFeed,
  measure: (spec: Omit<LoadSpec, "connections">) => Promise<LoadResult>,
): Promise<FeedRow> {
  const figures = { current: [] as FeedRound[], baseline: [] as FeedRound[] };
  const feedSpec = (side: Side) => ({
    origin: side.server.url,
    paths: sampleIds(side.seeded.referenceIds).map((id) => `/v1/references/${id}/extractions`),
    headers: { "X-API-Key": side.apiKey, "Content-Type": "application/json" },
    body: JSON.stringify({ status: "succeeded" }),
    ratePerSecond: settings.feedRate,
  });
  for (const side of sides) await feed.warm(feedSpec(side), settings.warmupSeconds + 1);
  for (let round = 0; round < settings.rounds; round++) {
    for (const side of round % 2 === 0 ? sides : [...sides].reverse()) {
      await feed.start(feedSpec(side));
      const reads = await measure(specsOf.get(side)!.reference).catch(async (error: unknown) => {
        await feed.stop();
        throw error;
      });
      const written = await feed.stop();
      figures[side.label as "current" | "baseline"].push({
        readsPerSecond: reads.rps,
        p50: written.p50,
        p99: written.p99,
        failed: written.sent - written.ok,
      });
      log(
        `${kind} round ${round + 1} ${side.label}: + ${settings.feedRate} writes/s, feed p99 ${written.p99.toFixed(1)} ms`,
      );
    }
  }
  return { kind, reads: ROW_NAMES.reference, ...figures };
}

const mean = (values: readonly number[]) => values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length);

export function formatBaseline(report: BaselineReport): string {
  const lines = [`Part B — this checkout ÷ ${report.ref} (${report.sha.slice(0, 12)}), same run, builds alternating`];
  const rows = report.rows.map((row) => {
    const anchor = report.anchors[row.kind];
    const anchorRps = row.row.startsWith("GraphQL") ? mean(anchor.apollo) : mean(anchor.fastify);
    return [
      row.kind,
      row.row,
      row.current.map(fmtInt).join(" / "),
      row.baseline.map(fmtInt).join(" / "),
      row.current.map((rps, round) => fmtRatio(rps / row.baseline[round]!)).join(", "),
      fmtRatio(mean(row.current) / anchorRps),
      fmtRatio(mean(row.baseline) / anchorRps),
    ];
  });
  lines.push(
    table(
      [
        "db",
        "row (fresh)",
        "current req/s",
        "baseline req/s",
        "current ÷ baseline per round",
        "current ÷ anchor",
        "baseline ÷ anchor",
      ],
      rows,
      [false, false, true, true, true, true, true],
    ),
  );
  if (report.feeds.length > 0) {
    lines.push(
      "",
      "Writes beside saturating reads: an open-loop feed of extraction outcomes while the GraphQL reference row " +
        "runs; feed latency in ms from each write's scheduled time, per round",
    );
    const rounds = (figures: readonly FeedRound[], pick: (round: FeedRound) => string) => figures.map(pick).join(" / ");
    lines.push(
      table(
        [
          "db",
          "current p50",
          "current p99",
          "baseline p50",
          "baseline p99",
          "current ÷ baseline p99",
          "reads req/s, current; baseline",
          "writes failed, current; baseline",
        ],
        report.feeds.map((row) => [
          row.kind,
          rounds(row.current, (r) => r.p50.toFixed(1)),
          rounds(row.current, (r) => r.p99.toFixed(1)),
          rounds(row.baseline, (r) => r.p50.toFixed(1)),
          rounds(row.baseline, (r) => r.p99.toFixed(1)),
          row.current.map((r, i) => fmtRatio(r.p99 / row.baseline[i]!.p99)).join(", "),
          `${rounds(row.current, (r) => fmtInt(r.readsPerSecond))}; ${rounds(row.baseline, (r) => fmtInt(r.readsPerSecond))}`,
          `${rounds(row.current, (r) => String(r.failed))}; ${rounds(row.baseline, (r) => String(r.failed))}`,
        ]),
        [false, true, true, true, true, true, true, true],
      ),
    );
  }
  lines.push(
    "",
    "Pipeline stages (this checkout, GraphQL reference, fresh, one request at a time): µs per request " +
      "(7 execute: Apollo's execution and the resolvers' database reads)",
  );
  lines.push(
    table(
      ["db", "stage", "passes", "µs / request"],
      report.stages.map((stage) => [stage.kind, stage.stage, fmtInt(stage.count), stage.meanMicroseconds.toFixed(1)]),
      [false, false, true, true],
    ),
  );
  return lines.join("\n");
}
