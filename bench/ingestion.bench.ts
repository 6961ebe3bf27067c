/*
 * The ingestion part of `npm run bench` (wired in by bench/run.ts as the part `ingestion`): how many lifecycle
 * events per second the tracking side can write, on SQLite and PostgreSQL, against the real server on 127.0.0.1,
 * next to a Fastify hello world measured in the same run (bench/baseline.ts) and the goals of issue 8.
 *
 *   single   BENCH_INGESTION_CONNECTIONS (10) writers, each request one event: POST …/extractions
 *            (`succeeded`) or POST …/updates (a document without estimates), at random over
 *            BENCH_INGESTION_REFERENCES (200) references. Events/s = 2xx requests/s.
 *   bulk     POST /v1/ingestions, 500 items per request over disjoint sets of 125 references (4 items each:
 *            a success, two updates that move the estimated arrival back and forth, a failure), on
 *            BENCH_INGESTION_BULK_CONNECTIONS (2) connections. Every request writes exactly 750 events
 *            (each update writes `reference_update_created` and `estimated_arrival_changed`), which the bench
 *            checks on a probe request; events/s = 2xx requests/s × 750.
 *
 * Settings (environment): BENCH_DATABASES (sqlite,postgres), BENCH_DURATION_SECONDS (10), BENCH_WARMUP_SECONDS
 * (2), the three above, TEST_DATABASE_URL (PostgreSQL admin connection). Webhooks: one endpoint (to a closed port,
 * the worker off), so every event also writes its outbox row, as in production. Everything it creates is removed.
 */
import { loadavg } from "node:os";
import type { App } from "../src/app.ts";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import { createTestDatabase } from "../test/support/test-server.ts";
import { startBaseline } from "./baseline.ts";
import { LoadGenerator, type LoadResult, type LoadSpec } from "./load.ts";
import { benchDatabases, intSetting } from "./settings.ts";
import { startBenchApp } from "./bench-app.ts";

type Kind = "sqlite" | "postgres";

const settings = {
  databases: benchDatabases(),
  durationSeconds: intSetting("BENCH_DURATION_SECONDS", 10, 1),
  warmupSeconds: intSetting("BENCH_WARMUP_SECONDS", 2),
  connections: intSetting("BENCH_INGESTION_CONNECTIONS", 10, 1),
  bulkConnections: intSetting("BENCH_INGESTION_BULK_CONNECTIONS", 2, 1),
  references: intSetting("BENCH_INGESTION_REFERENCES", 200, 1),
};

/** The goals, in events per second (none for bulk ingestion on PostgreSQL). */
const GOALS: Record<"single" | "bulk", Record<Kind, number | null>> = {
  single: { sqlite: 1_000, postgres: 500 },
  bulk: { sqlite: 10_000, postgres: null },
};

const BULK_ITEMS = 500;
const BULK_REFERENCES_PER_REQUEST = BULK_ITEMS / 4;
const EVENTS_PER_BULK_REQUEST = BULK_REFERENCES_PER_REQUEST * 6;

const log = (message: string) => process.stderr.write(`[bench:ingestion] ${message}\n`);

function containerNumber(serial: number): string {
  const firstTen = `INGU${String(serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

async function startApp(url: string): Promise<App> {
  const app = await startBenchApp(url, {
    WEBHOOK_WORKER: "off",
    // The deliveries go to a closed port on loopback; production refuses private targets unless allowed.
    WEBHOOK_ALLOWED_CIDRS: "127.0.0.0/8",
  });
  await app.http.listen({ host: "127.0.0.1", port: 0 });
  return app;
}

function baseUrlOf(app: App): string {
  const address = app.http.server.address();
  if (!address || typeof address === "string") throw new Error("server did not bind a TCP port");
  return `http://127.0.0.1:${address.port}`;
}

async function post(url: string, headers: Record<string, string>, body: unknown): Promise<any> {
  const response = await fetch(url, { method: "POST", headers, body: JSON.stringify(body) });
  const text = await response.text();
  if (!response.ok) throw new Error(`POST ${url} -> ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text);
}

interface Row {
  readonly kind: Kind | "—";
  readonly name: string;
  readonly result: LoadResult;
  /** Events written per 2xx request. */
  readonly eventsPerRequest: number;
  readonly goal: number | null;
}

async function measure(loads: LoadGenerator, spec: LoadSpec): Promise<LoadResult> {
  if (settings.warmupSeconds > 0) await loads.run({ ...spec, durationSeconds: settings.warmupSeconds });
  return loads.run({ ...spec, durationSeconds: settings.durationSeconds });
}

async function benchDatabase(kind: Kind, loads: LoadGenerator): Promise<Row[]> {
  log(`${kind}: creating a fresh database`);
  const database = await createTestDatabase(kind, "reftrail_bench_ingestion");
  let app: App | undefined;
  try {
    app = await startApp(database.url);
    const base = baseUrlOf(app);
    const { organization, apiKey } = await app.services.organizations.createOrganization("bench-ingestion");
    const headers = { "X-API-Key": apiKey.key, "Content-Type": "application/json" };
    await post(`${base}/v1/webhooks`, headers, { url: "http://127.0.0.1:9/ingestion" });
    const referenceCount = Math.max(settings.references, BULK_REFERENCES_PER_REQUEST * 4);
    log(`${kind}: creating ${referenceCount} references`);
    const ids: string[] = [];
    for (let serial = 0; serial < referenceCount; serial++) {
      const reference = await app.services.references.createReference(organization.id, {
        containerId: containerNumber(serial),
        carrierCode: "MAEU",
        tags: [{ name: `lane-${serial % 10}` }],
      });
      ids.push(reference.id);
    }

    // Single-event writes over many references.
    const singleVariants = ids.slice(0, settings.references).flatMap((id, index) => [
      { path: `/v1/references/${id}/extractions`, body: JSON.stringify({ status: "succeeded" }) },
      { path: `/v1/references/${id}/updates`, body: JSON.stringify({ vessel: `V${index}`, voyage: "042E" }) },
    ]);
    log(`${kind}: single-event ingestion, ${settings.connections} writers`);
    const single = await measure(loads, {
      url: `${base}/v1/references`,
      method: "POST",
      headers,
      variants: singleVariants,
      connections: settings.connections,
    });

    // Bulk ingestion: four disjoint sets of references, one request body each.
    const bodies = Array.from({ length: 4 }, (_, set) => {
      const items = ids
        .slice(set * BULK_REFERENCES_PER_REQUEST, (set + 1) * BULK_REFERENCES_PER_REQUEST)
        .flatMap((id) => [
          { kind: "extraction", reference_id: id, status: "succeeded" },
          { kind: "update", reference_id: id, update: { estimated_arrival: "2026-12-24T18:00:00Z", leg: 1 } },
          { kind: "update", reference_id: id, update: { estimated_arrival: "2026-12-26T18:00:00Z", leg: 2 } },
          { kind: "extraction", reference_id: id, status: "failed", error: { code: "TIMEOUT", message: "slow" } },
        ]);
      return { items };
    });
    for (const body of bodies) {
      const probe = await post(`${base}/v1/ingestions`, headers, body);
      if (probe.event_count !== EVENTS_PER_BULK_REQUEST) {
        throw new Error(`a bulk request wrote ${probe.event_count} events, expected ${EVENTS_PER_BULK_REQUEST}`);
      }
    }
    log(`${kind}: bulk ingestion, ${BULK_ITEMS} items per request, ${settings.bulkConnections} connections`);
    const bulk = await measure(loads, {
      url: `${base}/v1/ingestions`,
      method: "POST",
      headers,
      variants: bodies.map((body) => ({ path: "/v1/ingestions", body: JSON.stringify(body) })),
      connections: settings.bulkConnections,
    });
    return [
      {
        kind,
        name: `single event: POST …/extractions or …/updates (${settings.connections} writers)`,
        result: single,
        eventsPerRequest: 1,
        goal: GOALS.single[kind],
      },
      {
        kind,
        name: `bulk: POST /v1/ingestions, ${BULK_ITEMS} items (${settings.bulkConnections} connections)`,
        result: bulk,
        eventsPerRequest: EVENTS_PER_BULK_REQUEST,
        goal: GOALS.bulk[kind],
      },
    ];
  } finally {
    await app?.close();
    await database.drop();
  }
}

const fmtInt = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "—");
const fmtMs = (ms: number) => (Number.isNaN(ms) ? "—" : ms < 10 ? ms.toFixed(2) : ms.toFixed(1));

function formatTable(rows: Row[], anchor: LoadResult): string {
  const headers = ["database", "row", "req/s", "events/s", "p50 ms", "p99 ms", "vs Fastify req/s", "goal", "notes"];
  const cells = rows.map((row) => {
    const r = row.result;
    const events = r.rps * row.eventsPerRequest;
    const problems = [r.non2xx && `${r.non2xx} non-2xx`, r.errors && `${r.errors} errors`].filter(Boolean);
    const goal = row.goal === null ? "—" : `≥ ${fmtInt(row.goal)} ${events >= row.goal ? "met" : "NOT met"}`;
    return [
      row.kind,
      row.name,
      fmtInt(r.rps),
      row.eventsPerRequest === 0 ? "—" : fmtInt(events),
      fmtMs(r.p50),
      fmtMs(r.p99),
      `${(r.rps / anchor.rps).toFixed(3)}×`,
      goal,
      problems.join(", "),
    ];
  });
  const widths = headers.map((header, column) => Math.max(header.length, ...cells.map((row) => row[column]!.length)));
  const line = (row: string[]) => `| ${row.map((cell, column) => cell.padEnd(widths[column]!)).join(" | ")} |`;
  return [line(headers), `|${widths.map((width) => "-".repeat(width + 2)).join("|")}|`, ...cells.map(line)].join("\n");
}

/** Runs the ingestion rows on each database of BENCH_DATABASES, next to a Fastify hello world, and prints a table. */
export async function runIngestionBench(): Promise<void> {
  const loadAtStart = loadavg();
  const loads = new LoadGenerator();
  try {
    const baseline = await startBaseline();
    let anchor: LoadResult;
    try {
      log(`anchor: Fastify hello world, ${settings.connections} connections`);
      anchor = await measure(loads, { url: `${baseline.url}/hello`, connections: settings.connections });
    } finally {
      await baseline.close();
    }
    const rows: Row[] = [
      { kind: "—", name: "anchor: Fastify hello world (GET /hello)", result: anchor, eventsPerRequest: 0, goal: null },
    ];
    for (const kind of settings.databases) rows.push(...(await benchDatabase(kind, loads)));
    const load = (values: number[]) => values.map((value) => value.toFixed(2)).join("/");
    process.stdout.write(
      `\nIngestion (events written per second; ${settings.durationSeconds} s after ${settings.warmupSeconds} s warm-up; ` +
        `every event also writes one webhook outbox row)\n\n${formatTable(rows, anchor)}\n\n` +
        `load average (1/5/15 min) at start ${load(loadAtStart)}, at end ${load(loadavg())}\n`,
    );
  } finally {
    await loads.close();
  }
}
