/* The tables of the data path part (bench/data-path.bench.ts). */
import type { DataPathSettings, ScaleReport } from "./data-path.bench.ts";
import type { LoadResult } from "./load.ts";
import { featureShare, pairedShare, type VariantOf } from "./data-path.variants.ts";
import { fmtInt, fmtMs, fmtRatio, loadNotes, machineLine, table } from "./report-format.ts";

const fmtShare = (share: number) => (Number.isFinite(share) ? `${(share * 100).toFixed(1)} %` : "—");

/** A variant row's note: its feature's share, the median of its rounds' (each round's share in parentheses). */
function variantNote(variantOf: VariantOf): string {
  const rounds = variantOf.pairs.map((pair) => fmtShare(featureShare(pair, variantOf.variant))).join(", ");
  return `${variantOf.variant.feature}'s share: **${fmtShare(pairedShare(variantOf))}** (rounds: ${rounds})`;
}

export function formatDataPath(
  reports: readonly ScaleReport[],
  settings: DataPathSettings,
  loadAtStart: readonly number[],
): string {
  const out: string[] = [
    "Data path (headline): nothing served from the read cache — every request a random reference or a random pair " +
      "of tags, `Cache-Control: no-cache`",
    `${settings.tags} tags, each reference carrying 2 of them and holding ${settings.eventsPerReference} events; ` +
      `${settings.connections} connections, ${settings.durationSeconds} s measured after ${settings.warmupSeconds} s ` +
      `warm-up; latencies in ms; ratio = req/s ÷ the anchor's req/s, the mean of its runs just before and after ` +
      `the database's rows (GraphQL rows: Apollo hello, REST rows: Fastify hello; anchors' p50/p99 from the run ` +
      `before); the feed POSTs ${settings.feedRate} extraction outcomes/s open loop, its latency from each ` +
      `request's scheduled time; a variant row's share is what its feature costs the default row's request: ` +
      `budget 1 − default ÷ budget off, traces 1 − traces on ÷ default, the median of ${settings.variantRounds} ` +
      `rounds that each measure the default server and the variant's back to back (the variant row's own figures ` +
      `are its median round's)`,
    machineLine(loadAtStart),
    "",
  ];
  const rows: string[][] = [];
  for (const report of reports) {
    const size = fmtInt(report.references);
    const anchorRps = (runs: readonly [LoadResult, LoadResult]) => (runs[0].rps + runs[1].rps) / 2;
    const apolloRps = anchorRps(report.anchors.apollo);
    const fastifyRps = anchorRps(report.anchors.fastify);
    for (const [name, runs] of [
      ["anchor: Apollo hello (POST /graphql { hello })", report.anchors.apollo],
      ["anchor: Fastify hello (GET /hello)", report.anchors.fastify],
    ] as const) {
      const [before, after] = runs;
      rows.push([
        report.kind,
        size,
        name,
        fmtInt(anchorRps(runs)),
        fmtMs(before.p50),
        fmtMs(before.p99),
        fmtRatio(before.p99 / before.p50),
        "",
        "",
        "",
        [`before ${fmtInt(before.rps)}, after ${fmtInt(after.rps)} req/s`, loadNotes(before), loadNotes(after)]
          .filter(Boolean)
          .join("; "),
      ]);
    }
    for (const row of report.rows) {
      const anchorRpsOfRow = row.anchor === "apollo" ? apolloRps : fastifyRps;
      const r = row.result;
      const shareNote = row.variantOf ? variantNote(row.variantOf) : "";
      const feedNotes = row.feed
        ? [
            `feed answered ${fmtInt(row.feed.answeredInRun / row.feed.seconds)}/s of ${fmtInt(row.feed.sent / row.feed.seconds)}/s`,
            row.feed.non2xx && `feed ${row.feed.non2xx} non-2xx`,
            row.feed.errors && `feed ${row.feed.errors} errors`,
          ]
        : [];
      rows.push([
        report.kind,
        size,
        row.name,
        fmtInt(r.rps),
        fmtMs(r.p50),
        fmtMs(r.p99),
        fmtRatio(r.p99 / r.p50),
        `**${fmtRatio(r.rps / anchorRpsOfRow)}** ${row.anchor === "apollo" ? "Apollo" : "Fastify"}`,
        row.feed ? fmtMs(row.feed.p50) : "",
        row.feed ? fmtMs(row.feed.p99) : "",
        [shareNote, loadNotes(r), ...feedNotes].filter(Boolean).join(", "),
      ]);
    }
  }
  out.push(
    table(
      ["database", "refs", "row", "req/s", "p50", "p99", "p99/p50", "ratio", "feed p50", "feed p99", "notes"],
      rows,
      [false, true, false, true, true, true, true, true, true, true, false],
    ),
    "",
    "Server peak RSS (VmHWM of the server's own process, MiB, reset at the start of each part)",
    table(
      ["database", "refs", "anchors process", "reads", "reads + feed"],
      reports.map((r) => [
        r.kind,
        fmtInt(r.references),
        fmtInt(r.anchors.peakRssMiB),
        fmtInt(r.peakRssMiB.reads),
        fmtInt(r.peakRssMiB.mixed),
      ]),
      [false, true, true, true, true],
    ),
    "",
    "Database time of one request (its statements captured at the driver, each read timed alone: PostgreSQL " +
      "EXPLAIN ANALYZE execution, planning apart; SQLite the prepared statement on a read-only connection; medians)",
    table(
      ["database", "refs", "request", "statements", "reads", "db ms", "planning ms", "slowest read ms", "slowest read"],
      reports.flatMap((r) =>
        r.statementTimes.map((t) => {
          const slowest = [...t.reads].sort((a, b) => b.ms - a.ms)[0];
          return [
            r.kind,
            fmtInt(r.references),
            t.request,
            String(t.statements),
            String(t.reads.length),
            t.totalMs.toFixed(3),
            r.kind === "postgres" ? t.planningMs.toFixed(3) : "—",
            slowest ? slowest.ms.toFixed(3) : "—",
            slowest ? `\`${slowest.sql.slice(0, 70)}…\`` : "",
          ];
        }),
      ),
      [false, true, false, true, true, true, true, true, false],
    ),
  );
  return out.join("\n");
}
