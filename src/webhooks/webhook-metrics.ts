import { Counter, Gauge, Histogram, type Registry } from "prom-client";

/** Prometheus metrics of the delivery worker, on the server's /metrics registry. */
export class WebhookMetrics {
  /** Deliveries that got a 2xx. */
  readonly sent: Counter<"event_type">;
  /** Deliveries given up: retries exhausted, 410 Gone, or the endpoint disabled or deleted meanwhile. */
  readonly failed: Counter<"reason">;
  /** Failed attempts that were scheduled again. */
  readonly retried: Counter;
  /** Every attempt, by outcome class. */
  readonly attempts: Counter<"outcome">;
  readonly attemptDuration: Histogram;

  constructor(registry: Registry, countPending: () => Promise<number>) {
    const registers = [registry];
    this.sent = new Counter({
      name: "reftrail_webhook_deliveries_sent_total",
      help: "Webhook deliveries that received a 2xx response",
      labelNames: ["event_type"] as const,
      registers,
    });
    this.failed = new Counter({
      name: "reftrail_webhook_deliveries_failed_total",
      help: "Webhook deliveries given up (retries exhausted, 410 Gone, endpoint disabled or deleted, filters no longer taking the event)",
      labelNames: ["reason"] as const,
      registers,
    });
    this.retried = new Counter({
      name: "reftrail_webhook_delivery_retries_total",
      help: "Failed webhook attempts that were scheduled to be retried",
      registers,
    });
    this.attempts = new Counter({
      name: "reftrail_webhook_attempts_total",
      help: "Webhook HTTP attempts by outcome (success, http_error, network_error)",
      labelNames: ["outcome"] as const,
      registers,
    });
    this.attemptDuration = new Histogram({
      name: "reftrail_webhook_attempt_duration_seconds",
      help: "Duration of webhook HTTP attempts",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
      registers,
    });
    new Gauge({
      name: "reftrail_webhook_queue_depth",
      help: "Webhook deliveries waiting to be sent (due now or scheduled for a retry), all instances",
      registers,
      async collect() {
        this.set(await countPending());
      },
    });
  }

  /** Counts one recorded attempt by its verdict (`statusCode` null: no answer, or no broker confirm). */
  countAttempt(verdict: "succeeded" | "retry" | string, statusCode: number | null, eventType: string): void {
    this.attempts.inc({
      outcome: verdict === "succeeded" ? "success" : statusCode === null ? "network_error" : "http_error",
    });
    if (verdict === "succeeded") this.sent.inc({ event_type: eventType });
    else if (verdict === "retry") this.retried.inc();
    else this.failed.inc({ reason: verdict });
  }
}
