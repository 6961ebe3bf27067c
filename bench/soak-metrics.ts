/*
 * The server's own figures during a soak, read from its public `GET /metrics` (prom-client's default metrics and
 * reftrail's gauges) every few seconds. prom-client's event-loop delay percentiles come from a histogram that is
 * reset at each scrape, so each sample's p99 covers the seconds since the previous one.
 */

export interface ServerSample {
  /** Seconds since the soak started. */
  readonly at: number;
  /** CPU time the server has used since it started (user and system), seconds. */
  readonly cpuSeconds: number;
  readonly rssMiB: number;
  readonly heapUsedMiB: number;
  readonly openFds: number;
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
  /** Deliveries due or waiting (all endpoints). */
  readonly webhookQueueDepth: number;
  readonly subscriptionsOpen: number;
}

const METRICS = {
  cpuSeconds: ["process_cpu_seconds_total", 1],
  rssMiB: ["process_resident_memory_bytes", 1 / 2 ** 20],
  heapUsedMiB: ["nodejs_heap_size_used_bytes", 1 / 2 ** 20],
  openFds: ["process_open_fds", 1],
  loopDelayP99Ms: ["nodejs_eventloop_lag_p99_seconds", 1000],
  loopDelayMaxMs: ["nodejs_eventloop_lag_max_seconds", 1000],
  webhookQueueDepth: ["reftrail_webhook_queue_depth", 1],
  subscriptionsOpen: ["reftrail_subscriptions_open", 1],
} as const;

/** The sum of every series of `name` in a Prometheus text exposition (NaN when absent). */
export function metricValue(text: string, name: string): number {
  let sum = Number.NaN;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name) || (line[name.length] !== " " && line[name.length] !== "{")) continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    sum = Number.isNaN(sum) ? value : sum + value;
  }
  return sum;
}

export class ServerSampler {
  readonly samples: ServerSample[] = [];
  private timer: NodeJS.Timeout | undefined;
  private failures = 0;

  constructor(
    private readonly origin: string,
    private readonly token: string,
    private readonly startedAt: number,
  ) {}

  /** Samples now and then every `seconds`, until stop. */
  start(seconds: number): void {
    const tick = () => {
      void this.sample().finally(() => {
        if (this.timer) this.timer = setTimeout(tick, seconds * 1000);
      });
    };
    this.timer = setTimeout(tick, 0);
  }

  stop(): { failures: number } {
    clearTimeout(this.timer);
    this.timer = undefined;
    return { failures: this.failures };
  }

  /** Samples taken from `fromSeconds` (inclusive) to `toSeconds` (exclusive). */
  between(fromSeconds: number, toSeconds: number): ServerSample[] {
    return this.samples.filter((sample) => sample.at >= fromSeconds && sample.at < toSeconds);
  }

  private async sample(): Promise<void> {
    try {
      const response = await fetch(`${this.origin}/metrics`, {
        headers: { authorization: `Bearer ${this.token}` },
        signal: AbortSignal.timeout(10_000),
      });
      if (!response.ok) throw new Error(`GET /metrics answered ${response.status}`);
      const text = await response.text();
      const values = Object.fromEntries(
        Object.entries(METRICS).map(([key, [name, scale]]) => [key, metricValue(text, name) * scale]),
      ) as Omit<ServerSample, "at">;
      this.samples.push({ at: (Date.now() - this.startedAt) / 1000, ...values });
    } catch {
      this.failures += 1;
    }
  }
}
