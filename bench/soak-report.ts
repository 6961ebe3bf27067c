/*
 * The soak's figures per report interval, its verdict per goal (issue 35), and both as markdown. Goals: RSS and heap
 * flat after warm-up (the last 10 minutes within 10 % of minutes 5–15; shorter runs scale both windows), open
 * descriptors flat, each row's p99 over its last interval within 1.3× of its first steady one, nothing lost, nothing
 * duplicated beyond what replays resend, no 500.
 */
import { fmtInt, fmtMs, fmtRatio, table } from "./report-format.ts";
import type { ServerSample } from "./soak-metrics.ts";
import type { PathCheck, PathInterval, PathStatus } from "./soak-receiver.ts";
import type { IntervalStats, RowStats } from "./soak-traffic.ts";

export interface IntervalRow {
  readonly fromMinute: number;
  readonly toMinute: number;
  readonly samples: readonly ServerSample[];
  readonly reads: IntervalStats;
  readonly writes: IntervalStats;
  readonly webhooks: Record<string, PathInterval>;
}

export interface EndpointOutcome extends PathStatus, PathCheck {
  readonly path: string;
  readonly expected: number;
  /** Deliveries the replays of this endpoint scheduled (each may resend an event already answered). */
  readonly replayed: number;
}

export interface SoakOutcome {
  readonly kind: string;
  readonly minutes: number;
  readonly readRate: number;
  readonly writeRate: number;
  readonly capacity?: number;
  readonly intervals: readonly IntervalRow[];
  readonly endpoints: readonly EndpointOutcome[];
  readonly subscriptions: { readonly expected: number; readonly lost: number; readonly errors: readonly string[] };
  readonly replays: readonly { readonly minute: number; readonly status: number; readonly count: number }[];
  readonly terminated: readonly { readonly minute: number; readonly application: string }[];
  readonly drainSeconds: number;
  /** Deliveries still queued when the drain gave up (0 when everything arrived). */
  readonly queuedAtEnd: number;
  readonly loadAverage: { readonly start: readonly number[]; readonly end: readonly number[] };
}

const mean = (values: readonly number[]) =>
  values.length ? values.reduce((a, b) => a + b, 0) / values.length : Number.NaN;
const max = (values: readonly number[]) => (values.length ? Math.max(...values) : Number.NaN);

/** Warm-up excluded: minutes 5–15 and the last 10 of a run of 30 or more; proportionally shorter otherwise. */
export function windows(minutes: number) {
  return {
    baseline: [Math.min(5, minutes / 6), Math.min(15, minutes / 2)] as const,
    last: [minutes - Math.min(10, minutes / 3), minutes] as const,
  };
}

const samplesIn = (outcome: SoakOutcome, [from, to]: readonly [number, number]) =>
  outcome.intervals.flatMap((row) => row.samples).filter((s) => s.at >= from * 60 && s.at <= to * 60);

/** The first interval that starts after the warm-up, and the last one. */
function steadyIntervals(outcome: SoakOutcome) {
  const { baseline } = windows(outcome.minutes);
  const first = outcome.intervals.find((row) => row.fromMinute >= baseline[0]) ?? outcome.intervals[0];
  return { first, last: outcome.intervals.at(-1) };
}

/** Answers by status over the whole run (reads, writes and replays). */
export function statusTotals(outcome: SoakOutcome): Record<string, number> {
  const totals: Record<string, number> = {};
  for (const row of outcome.intervals) {
    for (const stats of [row.reads.all, row.writes.all]) {
      for (const [status, n] of Object.entries(stats?.statuses ?? {})) totals[status] = (totals[status] ?? 0) + n;
    }
  }
  for (const { status } of outcome.replays) totals[status] = (totals[status] ?? 0) + 1;
  return totals;
}

export interface Verdict {
  readonly goal: string;
  readonly figure: string;
  readonly met: boolean;
}

export function verdicts(outcome: SoakOutcome): Verdict[] {
  const { baseline, last } = windows(outcome.minutes);
  const before = samplesIn(outcome, baseline);
  const after = samplesIn(outcome, last);
  const span = (w: readonly [number, number]) => `${+w[0].toFixed(1)}–${+w[1].toFixed(1)}`;
  const flat = (label: string, pick: (s: ServerSample) => number): Verdict => {
    const ratio = mean(after.map(pick)) / mean(before.map(pick));
    return {
      goal: `${label} flat: minutes ${span(last)} within 10 % of minutes ${span(baseline)}`,
      figure: `${mean(before.map(pick)).toFixed(1)} → ${mean(after.map(pick)).toFixed(1)} MiB (${fmtRatio(ratio)})`,
      met: Math.abs(ratio - 1) <= 0.1,
    };
  };
  const fdsBefore = max(before.map((s) => s.openFds));
  const fdsAfter = max(after.map((s) => s.openFds));
  const { first, last: lastRow } = steadyIntervals(outcome);
  const p99Ratio = (label: string, pick: (row: IntervalRow) => number): Verdict => {
    const ratio = pick(lastRow!) / pick(first!);
    return {
      goal: `${label} p99, last interval within 1.3× of minutes ${first!.fromMinute}–${first!.toMinute}`,
      figure: `${fmtMs(pick(first!))} → ${fmtMs(pick(lastRow!))} ms (${fmtRatio(ratio)})`,
      met: ratio <= 1.3,
    };
  };
  const lost = outcome.endpoints.reduce((sum, e) => sum + e.lost, 0) + outcome.subscriptions.lost;
  const beyond = outcome.endpoints.reduce((sum, e) => sum + Math.max(0, e.duplicates - e.replayed), 0);
  const outOfOrder = outcome.endpoints.reduce((sum, e) => sum + e.outOfOrder, 0);
  const statuses = statusTotals(outcome);
  const fiveHundreds = statuses["500"] ?? 0;
  const other5xx = Object.entries(statuses).filter(([status]) => status >= "500" && status !== "500");
  return [
    flat("RSS", (s) => s.rssMiB),
    flat("heap used", (s) => s.heapUsedMiB),
    {
      goal: "open descriptors flat (last window's most within 10 % of the warm window's)",
      figure: `${fmtInt(fdsBefore)} → ${fmtInt(fdsAfter)}`,
      met: fdsAfter <= fdsBefore * 1.1,
    },
    p99Ratio("reads", (row) => row.reads.all?.p99 ?? Number.NaN),
    p99Ratio("writes", (row) => row.writes.all?.p99 ?? Number.NaN),
    p99Ratio("webhooks (endpoints that never fail)", (row) => row.webhooks.steady?.p99 ?? Number.NaN),
    {
      goal: "0 lost (webhook events and subscription events)",
      figure: `${lost} of ${outcome.endpoints.reduce((s, e) => s + e.expected, 0) + outcome.subscriptions.expected}`,
      met: lost === 0,
    },
    {
      goal: "0 duplicated beyond at-least-once (a second 200 for an event, replays' resends apart)",
      figure: `${beyond}`,
      met: beyond === 0,
    },
    { goal: "0 out of order on the ordered endpoint", figure: `${outOfOrder}`, met: outOfOrder === 0 },
    {
      // The server runs with its production limits (the per-minute limit, default budgets): a load that fits them
      // is never refused.
      goal: "0 × 429 (per-minute limit or budget, at production defaults)",
      figure: `${statuses["429"] ?? 0}`,
      met: (statuses["429"] ?? 0) === 0,
    },
    {
      goal: "0 × 500 (other 5xx reported beside)",
      figure: `${fiveHundreds}${other5xx.length ? `; ${other5xx.map(([s, n]) => `${n} × ${s}`).join(", ")}` : ""}`,
      met: fiveHundreds === 0,
    },
  ];
}

const pair = (stats: { p50: number; p99: number } | undefined) =>
  stats ? `${fmtMs(stats.p50)} / ${fmtMs(stats.p99)}` : "—";

const non2xx = (stats: RowStats | undefined) =>
  Object.entries(stats?.statuses ?? {}).reduce((sum, [status, n]) => sum + (status.startsWith("2") ? 0 : n), 0);
/** Requests that got no answer (reset, refused, 30 s without headers) or were never sent (too many in flight). */
const noAnswer = (stats: RowStats | undefined) => (stats ? stats.errors + stats.skipped : 0);

/** The server's CPU time over the interval's wall time (100 % = one core busy). */
function cpuShare(samples: readonly ServerSample[]): string {
  const first = samples[0];
  const last = samples.at(-1);
  if (!first || !last || last.at <= first.at) return "—";
  return `${(((last.cpuSeconds - first.cpuSeconds) / (last.at - first.at)) * 100).toFixed(0)} %`;
}

export function formatSoak(outcome: SoakOutcome): string {
  const seconds = (row: IntervalRow) => (row.toMinute - row.fromMinute) * 60;
  const main = table(
    [
      "minutes",
      "server CPU",
      "RSS MiB",
      "heap MiB",
      "fds",
      "loop delay p99 ms",
      "reads/s",
      "reads p50 / p99 ms",
      "writes p50 / p99 ms",
      "webhooks p50 / p99 ms",
      "queue",
      "non-2xx / no answer",
    ],
    outcome.intervals.map((row) => [
      `${row.fromMinute}–${row.toMinute}`,
      cpuShare(row.samples),
      mean(row.samples.map((s) => s.rssMiB)).toFixed(0),
      mean(row.samples.map((s) => s.heapUsedMiB)).toFixed(0),
      fmtInt(max(row.samples.map((s) => s.openFds))),
      fmtMs(max(row.samples.map((s) => s.loopDelayP99Ms))),
      fmtInt((row.reads.all?.ok ?? 0) / seconds(row)),
      pair(row.reads.all),
      pair(row.writes.all),
      pair(row.webhooks.steady),
      fmtInt(max(row.samples.map((s) => s.webhookQueueDepth))),
      `${fmtInt(non2xx(row.reads.all) + non2xx(row.writes.all))} / ${fmtInt(noAnswer(row.reads.all) + noAnswer(row.writes.all))}`,
    ]),
    [false, true, true, true, true, true, true, true, true, true, true, true],
  );
  const rowNames = [
    ...Object.keys(outcome.intervals[0]?.reads ?? {}).filter((name) => name !== "all"),
    ...Object.keys(outcome.intervals[0]?.writes ?? {}).filter((name) => name !== "all"),
  ];
  const paths = Object.keys(outcome.intervals[0]?.webhooks ?? {}).filter((path) => path !== "steady");
  const detail = table(
    ["minutes", ...rowNames, ...paths.map((path) => `webhook ${path}`)],
    outcome.intervals.map((row) => [
      `${row.fromMinute}–${row.toMinute}`,
      ...rowNames.map((name) => pair(row.reads[name] ?? row.writes[name])),
      ...paths.map((path) => pair(row.webhooks[path])),
    ]),
    [false, ...rowNames.map(() => true), ...paths.map(() => true)],
  );
  const endpoints = table(
    ["endpoint", "expected", "lost", "duplicates", "replayed", "out of order", "unexpected"],
    outcome.endpoints.map((e) => [
      e.path,
      fmtInt(e.expected),
      fmtInt(e.lost) + (e.lost ? ` (e.g. ${e.lostSample[0]})` : ""),
      fmtInt(e.duplicates),
      fmtInt(e.replayed),
      fmtInt(e.outOfOrder),
      fmtInt(e.unexpected),
    ]),
    [false, true, true, true, true, true, true],
  );
  const goals = table(
    ["goal", "figure", "met"],
    verdicts(outcome).map((v) => [v.goal, v.figure, v.met ? "yes" : "**no**"]),
  );
  const load = (l: readonly number[]) => l.map((x) => x.toFixed(2)).join(" / ");
  return [
    `### ${outcome.kind}: ${outcome.minutes} minutes, ${fmtInt(outcome.readRate)} reads/s` +
      `${outcome.capacity ? ` (half of ${fmtInt(outcome.capacity)} measured)` : ""}, ${outcome.writeRate} writes/s`,
    "",
    main,
    "",
    "p50 / p99 ms per row (reads and writes from their scheduled time; webhooks from occurred_at to the first 200):",
    "",
    detail,
    "",
    endpoints,
    "",
    `Subscriptions: ${fmtInt(outcome.subscriptions.expected)} events expected, ${outcome.subscriptions.lost} lost` +
      `${outcome.subscriptions.errors.length ? `, errors: ${outcome.subscriptions.errors.slice(0, 3).join("; ")}` : ""}.` +
      ` Replays: ${outcome.replays.map((r) => `minute ${r.minute} → ${r.status} (${r.count})`).join(", ") || "none"}.` +
      ` Connections terminated: ${outcome.terminated.length}` +
      `${outcome.terminated.length ? ` (${[...new Set(outcome.terminated.map((t) => t.application || "unnamed"))].join(", ")})` : ""}.` +
      (outcome.queuedAtEnd
        ? ` The drain gave up after ${outcome.drainSeconds.toFixed(0)} s with ${fmtInt(outcome.queuedAtEnd)} deliveries` +
          " still queued: the lost count includes them."
        : ` Drained in ${outcome.drainSeconds.toFixed(0)} s.`) +
      ` Load average ${load(outcome.loadAverage.start)} → ${load(outcome.loadAverage.end)}.`,
    "",
    goals,
  ].join("\n");
}
