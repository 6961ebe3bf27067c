/*
 * The parent's side of bench/feed-worker.mjs: an open-loop write feed in a worker thread of its own, off the
 * server's process and off the load generator's thread.
 */
import { Worker } from "node:worker_threads";

export interface FeedSpec {
  /** http://127.0.0.1:<port> */
  readonly origin: string;
  /** Each request POSTs to one of these, picked at random. */
  readonly paths: readonly string[];
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly ratePerSecond: number;
}

export interface FeedResult {
  readonly seconds: number;
  readonly sent: number;
  /** 2xx answers, including those that arrived after the feed stopped sending. */
  readonly ok: number;
  /** 2xx answers that arrived while the feed was sending. */
  readonly answeredInRun: number;
  readonly non2xx: number;
  readonly errors: number;
  /** From each request's scheduled time to the end of its response, ms (2xx only). */
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export class WriteFeed {
  private readonly worker = new Worker(new URL("./feed-worker.mjs", import.meta.url));

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

  async start(spec: FeedSpec): Promise<void> {
    const started = this.next<{ started: true }>();
    this.worker.postMessage({ start: spec });
    await started;
  }

  async stop(): Promise<FeedResult> {
    const stopped = this.next<{ result: FeedResult }>();
    this.worker.postMessage({ stop: true });
    return (await stopped).result;
  }

  /**
   * Runs the feed for `seconds` and forgets what it measured: the writes' first second runs cold (the server's
   * write code and this client's own), so the rows beside the feed warm it first, as the reads are warmed.
   */
  async warm(spec: FeedSpec, seconds: number): Promise<void> {
    await this.start(spec);
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    await this.stop();
  }

  async close(): Promise<void> {
    await this.worker.terminate();
  }
}
