/*
 * Load generation in a worker thread, so that the client does not share the server's event loop. autocannon
 * drives the traffic; latencies are taken from its per-response event (float milliseconds from hrtime) because
 * its own histogram records whole milliseconds, too coarse for sub-millisecond hello-world requests.
 */
import { Worker } from "node:worker_threads";

export interface LoadSpec {
  readonly url: string;
  readonly method?: "GET" | "POST";
  readonly headers?: Record<string, string>;
  readonly body?: string;
  /**
   * Each request goes to one of these, picked at random (the same method and headers), instead of `url`'s path
   * and `body`: writes spread over many references.
   */
  readonly variants?: readonly {
    readonly path: string;
    readonly body?: string;
    readonly headers?: Record<string, string>;
  }[];
  readonly connections: number;
  /** Run for this many seconds… */
  readonly durationSeconds?: number;
  /**
   * …after warming up for this many seconds on the same connections, once every connection has had a response
   * (see load-worker.mjs: opening connections to a busy server is slow, and is reported as `rampSeconds`).
   */
  readonly warmupSeconds?: number;
  /** …or send exactly this many requests. */
  readonly amount?: number;
  /** Also report each connection's request count and latencies (to tell a slow server from unfair service). */
  readonly perConnection?: boolean;
}

export interface ConnectionResult {
  readonly requests: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export interface LoadResult {
  /** 2xx responses per second over the run. */
  readonly rps: number;
  readonly requests: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly timeouts: number;
  readonly seconds: number;
  /** With `warmupSeconds`: how long it took until every connection had had a response. */
  readonly rampSeconds?: number;
  /** Latency percentiles of 2xx responses, milliseconds. */
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
  readonly mean: number;
  readonly perConnection?: readonly ConnectionResult[];
}

/** A worker thread that runs one load at a time; started once, so that each run does not pay its start-up. */
export class LoadGenerator {
  private readonly worker = new Worker(new URL("./load-worker.mjs", import.meta.url));
  private readonly pending = new Map<number, { resolve(result: LoadResult): void; reject(error: Error): void }>();
  private nextId = 1;

  constructor() {
    this.worker.on("message", (message: { id: number; result?: LoadResult; error?: string }) => {
      const waiter = this.pending.get(message.id);
      this.pending.delete(message.id);
      if (message.error !== undefined) waiter?.reject(new Error(message.error));
      else waiter?.resolve(message.result!);
    });
    const failAll = (error: Error) => {
      for (const waiter of this.pending.values()) waiter.reject(error);
      this.pending.clear();
    };
    this.worker.on("error", failAll);
    this.worker.on("exit", (code) => failAll(new Error(`load worker exited with code ${code}`)));
  }

  run(spec: LoadSpec): Promise<LoadResult> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ id, spec });
    });
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}
