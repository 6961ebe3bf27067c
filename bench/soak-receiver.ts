/* The parent's side of bench/soak-receiver.worker.mjs: the soak's webhook receivers in a thread of their own. */
import { Worker } from "node:worker_threads";

export interface ReceiverPath {
  /** Share of the requests answered 500, at random. */
  readonly failRatio?: number;
  /** Check that each reference's events are first answered in the log's order. */
  readonly ordered?: boolean;
}

export interface PathInterval {
  readonly requests: number;
  readonly failedOnPurpose: number;
  /** Events answered 200 for the first time in the interval, and their occurred_at → arrival latency (ms). */
  readonly firsts: number;
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
}

export interface PathStatus {
  /** Events answered 200 at least once. */
  readonly distinct: number;
  /** 200 answers to an event already answered 200. */
  readonly duplicates: number;
  /** Ordered paths: events first answered after a later event of their reference. */
  readonly outOfOrder: number;
}

export interface PathCheck {
  readonly lost: number;
  readonly lostSample: readonly string[];
  readonly unexpected: number;
}

export class SoakReceivers {
  private nextRequest = 0;
  private readonly waiting = new Map<number, (answer: any) => void>();

  private constructor(
    private readonly worker: Worker,
    readonly port: number,
  ) {
    worker.on("message", (message: { requestId?: number }) => {
      if (message.requestId === undefined) return;
      this.waiting.get(message.requestId)?.(message);
      this.waiting.delete(message.requestId);
    });
  }

  static async start(paths: Readonly<Record<string, ReceiverPath>>): Promise<SoakReceivers> {
    const worker = new Worker(new URL("./soak-receiver.worker.mjs", import.meta.url), { workerData: { paths } });
    const port = await new Promise<number>((resolve, reject) => {
      worker.once("error", reject);
      worker.on("message", (message: { type?: string; port?: number }) => {
        if (message.type === "ready") resolve(message.port!);
      });
    });
    return new SoakReceivers(worker, port);
  }

  url(path: string): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  private ask<T>(message: Record<string, unknown>): Promise<T> {
    const requestId = this.nextRequest++;
    return new Promise<T>((resolve) => {
      this.waiting.set(requestId, resolve);
      this.worker.postMessage({ ...message, requestId });
    });
  }

  async takeInterval(): Promise<Record<string, PathInterval>> {
    return (await this.ask<{ interval: Record<string, PathInterval> }>({ type: "interval" })).interval;
  }

  async status(): Promise<Record<string, PathStatus>> {
    return (await this.ask<{ status: Record<string, PathStatus> }>({ type: "status" })).status;
  }

  async check(path: string, expected: readonly string[]): Promise<PathCheck> {
    return (await this.ask<{ check: PathCheck }>({ type: "check", path, expected })).check;
  }

  async close(): Promise<void> {
    await this.ask({ type: "close" });
    await this.worker.terminate();
  }
}
