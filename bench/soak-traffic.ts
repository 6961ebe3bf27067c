/*
 * The parent's side of bench/soak-traffic.worker.mjs: open-loop traffic at a fixed rate in a worker thread, off the
 * server's process, with its figures taken per report interval.
 */
import { Worker } from "node:worker_threads";

export interface TrafficRow {
  readonly name: string;
  /** Relative share of the requests that go to this row. */
  readonly share: number;
  readonly method: "GET" | "POST";
  readonly headers: Record<string, string>;
  /** Each request picks one at random: the random keys. */
  /** Each request goes to one of these, picked at random; a variant's headers add to (or replace) the row's. */
  readonly variants: readonly {
    readonly path: string;
    readonly body?: string;
    readonly headers?: Record<string, string>;
  }[];
}

export interface TrafficSpec {
  /** http://127.0.0.1:<port> */
  readonly origin: string;
  readonly ratePerSecond: number;
  readonly rows: readonly TrafficRow[];
  readonly connections?: number;
}

export interface RowStats {
  readonly sent: number;
  /** 2xx answers that arrived in the interval. */
  readonly ok: number;
  /** Answers by HTTP status, in the interval. */
  readonly statuses: Record<string, number>;
  /** Requests that ended without an answer (connection refused or reset, timeout). */
  readonly errors: number;
  /** Requests not sent because too many were in flight already. */
  readonly skipped: number;
  readonly inFlight: number;
  /** From the scheduled time to the end of the response, ms (2xx only). */
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export type IntervalStats = Record<string, RowStats>;

export class OpenLoopTraffic {
  private readonly worker = new Worker(new URL("./soak-traffic.worker.mjs", import.meta.url));

  private next<T>(): Promise<T> {
    return new Promise((resolve, reject) => {
      const onError = (error: Error) => reject(error);
      this.worker.once("error", onError);
      this.worker.once("message", (message: { error?: string } & T) => {
        this.worker.off("error", onError);
        if (message.error !== undefined) reject(new Error(message.error));
        else resolve(message);
      });
    });
  }

  async start(spec: TrafficSpec): Promise<void> {
    const started = this.next<{ started: true }>();
    this.worker.postMessage({ start: spec });
    await started;
  }

  /** The figures since the previous call (or the start), per row. */
  async takeInterval(): Promise<IntervalStats> {
    const answer = this.next<{ interval: IntervalStats }>();
    this.worker.postMessage({ interval: true });
    return (await answer).interval;
  }

  /** Stops sending, waits for the requests in flight, and returns the figures of the last interval. */
  async stop(): Promise<IntervalStats> {
    const answer = this.next<{ interval: IntervalStats }>();
    this.worker.postMessage({ stop: true });
    return (await answer).interval;
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}
