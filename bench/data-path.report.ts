/* The tables of the data path part (bench/data-path.bench.ts). */
import type { DataPathSettings, ScaleReport } from "./data-path.bench.ts";
import { fmtInt, fmtMs, fmtRatio, loadNotes, machineLine, table } from "./report-format.ts";

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
      `warm-up; latencies in ms; ratio = req/s ÷ the anchor's req/s in the same run (GraphQL rows: Apollo hello, ` +
      `REST rows: Fastify hello); the feed POSTs ${settings.feedRate} extraction outcomes/s open loop`,
    machineLine(loadAtStart),
    "",
  ];
  const rows: string[][] = [];
  for (const report of reports) {
    const size = fmtInt(report.references);
    const { apollo, fastify } = report.anchors;
    rows.push([
      report.kind,
      size,
      "anchor: Apollo hello (POST /graphql { hello })",
      fmtInt(apollo.rps),
      fmtMs(apollo.p50),
      fmtMs(apollo.p99),
      fmtRatio(apollo.p99 / apollo.p50),
      "",
      "",
      "",
      loadNotes(apollo),
    ]);
    rows.push([
      report.kind,
      size,
      "anchor: Fastify hello (GET /hello)",
      fmtInt(fastify.rps),
      fmtMs(fastify.p50),
      fmtMs(fastify.p99),
      fmtRatio(fastify.p99 / fastify.p50),
      "",
      "",
      "",
      loadNotes(fastify),
    ]);
    for (const row of report.rows) {
      const anchor = row.anchor === "apollo" ? apollo : fastify;
      const r = row.result;
      const feedNotes = row.feed
        ? [row.feed.non2xx && `feed ${row.feed.non2xx} non-2xx`, row.feed.errors && `feed ${row.feed.errors} errors`]
        : [];
      rows.push([
        report.kind,
        size,
        row.name,
        fmtInt(r.rps),
        fmtMs(r.p50),
        fmtMs(r.p99),
        fmtRatio(r.p99 / r.p50),
        `**${fmtRatio(r.rps / anchor.rps)}** ${row.anchor === "apollo" ? "Apollo" : "Fastify"}`,
        row.feed ? fmtMs(row.feed.p50) : "",
        row.feed ? fmtMs(row.feed.p99) : "",
        [loadNotes(r), ...feedNotes].filter(Boolean).join(", "),
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
      "EXPLAIN ANALYZE planning + execution, SQLite the prepared statement on a read-only connection; medians)",
    table(
      ["database", "refs", "request", "statements", "reads", "db ms", "slowest read ms", "slowest read"],
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
            slowest ? slowest.ms.toFixed(3) : "—",
            slowest ? `\`${slowest.sql.slice(0, 70)}…\`` : "",
          ];
        }),
      ),
      [false, true, false, true, true, true, true, false],
    ),
  );
  return out.join("\n");
}
