/* Formatting shared by the bench's tables (markdown, so that a run pastes into docs/benchmarks.md). */
import { cpus, loadavg } from "node:os";
import type { LoadResult } from "./load.ts";

export const fmtMs = (ms: number) =>
  Number.isNaN(ms) ? "—" : ms < 10 ? ms.toFixed(2) : ms < 100 ? ms.toFixed(1) : ms.toFixed(0);
export const fmtInt = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "—");
export const fmtRatio = (r: number) => (Number.isFinite(r) ? `${r < 0.1 ? r.toFixed(3) : r.toFixed(2)}×` : "—");
export const fmtLoad = (load: readonly number[]) => load.map((l) => l.toFixed(2)).join(" / ");

export function table(headers: string[], rows: string[][], rightAligned: boolean[] = []): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (rightAligned[i] ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join(" | ")} |`;
  const rule = `|${widths.map((w, i) => (rightAligned[i] ? `${"-".repeat(w + 1)}:` : "-".repeat(w + 2))).join("|")}|`;
  return [line(headers), rule, ...rows.map(line)].join("\n");
}

/** Non-2xx, errors, timeouts and a slow ramp (see bench/load-worker.mjs), for a row's notes. */
export function loadNotes(result: LoadResult): string {
  const problems: string[] = [];
  if (result.non2xx) problems.push(`${result.non2xx} non-2xx`);
  if (result.errors) problems.push(`${result.errors} errors`);
  if (result.timeouts) problems.push(`${result.timeouts} timeouts`);
  if (result.rampSeconds !== undefined && result.rampSeconds >= 0.5)
    problems.push(`connections all served after ${result.rampSeconds.toFixed(1)} s`);
  return problems.join(", ");
}

/** The machine line every table carries: cores, and the load average when the run started and now. */
export function machineLine(loadAtStart: readonly number[]): string {
  return (
    `machine: ${cpus().length} CPU(s) (${cpus()[0]?.model ?? "?"}), Node ${process.version}; load average ` +
    `(1/5/15 min) at start ${fmtLoad(loadAtStart)}, now ${fmtLoad(loadavg())}`
  );
}
