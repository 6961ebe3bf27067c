/*
 * The data part's variant rows (issue 37): the GraphQL fresh rows on a server that differs from the default by one
 * feature, so that the feature's cost is a ratio taken in the same run:
 * - budget off: the server built without its cost budget (bench/bench-app.ts, BENCH_BUDGET=off: nothing charged,
 *   settled or published). The default rows pay the budget, so its share of a request is 1 − default ÷ off.
 * - traces on: every span recorded and batched, as for a collector, into the SDK's in-memory exporter
 *   (BENCH_TRACING=memory). The default rows have traces off, so their cost is 1 − on ÷ default.
 * Measured in pairs: each round runs the default server and the variant's back to back, in turns (default first in
 * odd rounds, the variant first in even ones), and the share is the median of the rounds' shares. A pair's two runs
 * see the machine in the same state; runs minutes apart do not (the layout before, one variant run between a
 * default run before it and one after, put the budget's share of the SQLite reference at −32.8 % in one run: the
 * budget making requests a third faster; paired rounds ten minutes later gave 7.0 %).
 */
import type { LoadResult, LoadSpec } from "./load.ts";
import type { Kind } from "./seed.ts";
import { startReftrailChild } from "./server-child.ts";
import { BENCH_WEBHOOK_SECRET_KEY } from "./settings.ts";

export interface Variant {
  /** How the variant's rows' names end. */
  readonly suffix: string;
  /** What the variant adds or removes, as the report names its share. */
  readonly feature: string;
  /** Whether the variant has the feature (traces on) or the default has it (budget off). */
  readonly featureOn: boolean;
  readonly env: Readonly<Record<string, string>>;
}

export const VARIANTS = {
  budgetOff: { suffix: "budget off", feature: "budget", featureOn: false, env: { BENCH_BUDGET: "off" } },
  traced: {
    suffix: "traces on (in-memory exporter)",
    feature: "traces",
    featureOn: true,
    env: { BENCH_TRACING: "memory" },
  },
} as const satisfies Record<string, Variant>;

/** One round's pair: the default row and its variant, measured back to back. */
export interface VariantPair {
  readonly defaultRps: number;
  readonly variantRps: number;
}

/** A variant row: which default row it is compared with, for which feature, and each round's pair. */
export interface VariantOf {
  readonly row: string;
  readonly variant: Variant;
  readonly pairs: readonly VariantPair[];
}

/**
 * What `feature` costs a request, as a share of the request without it, from the req/s of the default row and
 * of its variant measured back to back: 1 − with ÷ without.
 */
export function featureShare(pair: VariantPair, variant: Variant): number {
  return variant.featureOn ? 1 - pair.variantRps / pair.defaultRps : 1 - pair.defaultRps / pair.variantRps;
}

/** The median of the rounds' shares: the figure a variant row reports. */
export function pairedShare(variantOf: VariantOf): number {
  const shares = variantOf.pairs.map((pair) => featureShare(pair, variantOf.variant)).sort((a, b) => a - b);
  return shares[Math.floor(shares.length / 2)] ?? Number.NaN;
}

type ReadKey = "reference" | "graphqlPage";
type Measure = (spec: Omit<LoadSpec, "connections">) => Promise<LoadResult>;

/** The two GraphQL fresh rows, by their key in `readSpecs` and their default row's name. */
export interface VariantReads {
  readonly keys: readonly ReadKey[];
  /** The reads against the default server. */
  readonly defaultSpecs: Record<ReadKey, Omit<LoadSpec, "connections">>;
  readonly specsOn: (url: string) => Promise<Record<ReadKey, Omit<LoadSpec, "connections">>>;
  readonly defaultName: (key: ReadKey) => string;
}

/**
 * The variant's rows, on a server of its own started for them, each measured in `rounds` pairs with the default
 * server (idle between its runs). A row's own figures are those of its median round's variant run.
 */
export async function variantRows(
  variant: Variant,
  url: string,
  reads: VariantReads,
  rounds: number,
  measure: Measure,
  log: (message: string) => void,
  kind: Kind,
): Promise<{ name: string; anchor: "apollo"; result: LoadResult; variantOf: VariantOf }[]> {
  const server = await startReftrailChild(url, { WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY, ...variant.env });
  const rows = [];
  try {
    const specs = await reads.specsOn(server.url);
    for (const key of reads.keys) {
      const name = `${reads.defaultName(key)}, ${variant.suffix}`;
      const runs: { pair: VariantPair; result: LoadResult }[] = [];
      for (let round = 1; round <= rounds; round++) {
        log(`${kind}: ${name}, round ${round} of ${rounds}`);
        const defaultFirst = round % 2 === 1;
        const first = await measure(defaultFirst ? reads.defaultSpecs[key] : specs[key]);
        const second = await measure(defaultFirst ? specs[key] : reads.defaultSpecs[key]);
        const [defaultRun, variantRun] = defaultFirst ? [first, second] : [second, first];
        runs.push({ pair: { defaultRps: defaultRun.rps, variantRps: variantRun.rps }, result: variantRun });
      }
      const byShare = [...runs].sort((a, b) => featureShare(a.pair, variant) - featureShare(b.pair, variant));
      rows.push({
        name,
        anchor: "apollo" as const,
        result: byShare[Math.floor(byShare.length / 2)]!.result,
        variantOf: { row: reads.defaultName(key), variant, pairs: runs.map((run) => run.pair) },
      });
    }
  } finally {
    await server.stop();
  }
  return rows;
}
