/*
 * The data part's variant rows (issue 37): the GraphQL fresh rows again, right after the default rows, on a server
 * that differs from the default by one feature, so that the feature's cost is a ratio taken in the same run:
 * - budget off: the server built without its cost budget (bench/bench-app.ts, BENCH_BUDGET=off: nothing charged,
 *   settled or published). The default rows pay the budget, so its share of a request is 1 − default ÷ off.
 * - traces on: every span recorded and batched, as for a collector, into the SDK's in-memory exporter
 *   (BENCH_TRACING=memory). The default rows have traces off, so their cost is 1 − on ÷ default.
 * The default rows are measured again after the variants' (bench/data-path.bench.ts), and "default" is the mean of
 * the two runs: a single run before the variants was measured with the machine in another state (a first run put
 * a feature's share at −49 % on one row and +38 % on the other).
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

/** The name of a default row measured again after its variants (its share is taken to the mean of the two). */
export function againName(defaultRow: string): string {
  return `${defaultRow}, again`;
}

/** A variant row: which default row it is compared with, and for which feature. */
export interface VariantOf {
  readonly row: string;
  readonly variant: Variant;
}

/**
 * What `feature` costs a request, as a share of the request without it, from the req/s of the default row and
 * of its variant measured in the same run: 1 − with ÷ without.
 */
export function featureShare(defaultRps: number, variantRps: number, variant: Variant): number {
  return variant.featureOn ? 1 - variantRps / defaultRps : 1 - defaultRps / variantRps;
}

/** The two GraphQL fresh rows, by their key in `readSpecs` and their default row's name. */
export interface VariantReads {
  readonly keys: readonly ("reference" | "graphqlPage")[];
  readonly specsOn: (url: string) => Promise<Record<"reference" | "graphqlPage", Omit<LoadSpec, "connections">>>;
  readonly defaultName: (key: "reference" | "graphqlPage") => string;
}

/** The variant's rows, on a server of its own started for them (the default server stays up, idle). */
export async function variantRows(
  variant: Variant,
  url: string,
  reads: VariantReads,
  measure: (spec: Omit<LoadSpec, "connections">) => Promise<LoadResult>,
  log: (message: string) => void,
  kind: Kind,
): Promise<{ name: string; anchor: "apollo"; result: LoadResult; variantOf: VariantOf }[]> {
  const server = await startReftrailChild(url, { WEBHOOK_SECRET_KEY: BENCH_WEBHOOK_SECRET_KEY, ...variant.env });
  const rows = [];
  try {
    const specs = await reads.specsOn(server.url);
    for (const key of reads.keys) {
      const name = `${reads.defaultName(key)}, ${variant.suffix}`;
      log(`${kind}: ${name}`);
      rows.push({
        name,
        anchor: "apollo" as const,
        result: await measure(specs[key]),
        variantOf: { row: reads.defaultName(key), variant },
      });
    }
  } finally {
    await server.stop();
  }
  return rows;
}
