/*
 * What each pipeline stage costs the main thread: the bench (bench/pipeline-stages.ts) gives the pipeline a
 * StageTimings and reads the microseconds per request of each stage. A server has none: the stages then only test
 * a null, and nothing is measured.
 */

/** The stages, in the order a request meets them (graphql-pipeline.ts). */
export const PIPELINE_STAGES = [
  "authenticate",
  "resolve the document",
  "look up the read cache",
  "prepare",
  "admit",
  "charge",
  "execute",
  "publish",
] as const;

export type PipelineStage = (typeof PIPELINE_STAGES)[number];

export class StageTimings {
  private readonly totals = new Map<PipelineStage, { count: number; nanoseconds: bigint }>();

  /** A start mark for {@link record}. */
  start(): bigint {
    return process.hrtime.bigint();
  }

  /** Counts one pass of `stage` since `startedAt`. */
  record(stage: PipelineStage, startedAt: bigint): void {
    const elapsed = process.hrtime.bigint() - startedAt;
    const total = this.totals.get(stage);
    if (total) {
      total.count += 1;
      total.nanoseconds += elapsed;
    } else this.totals.set(stage, { count: 1, nanoseconds: elapsed });
  }

  /** Each stage's passes and mean microseconds per pass, then forgets them. */
  take(): { stage: PipelineStage; count: number; meanMicroseconds: number }[] {
    const rows = PIPELINE_STAGES.flatMap((stage) => {
      const total = this.totals.get(stage);
      return total
        ? [{ stage, count: total.count, meanMicroseconds: Number(total.nanoseconds / BigInt(total.count)) / 1000 }]
        : [];
    });
    this.totals.clear();
    return rows;
  }
}
