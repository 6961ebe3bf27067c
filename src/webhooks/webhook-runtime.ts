import type { FastifyBaseLogger } from "fastify";
import type { Tracer } from "@opentelemetry/api";
import type { Registry } from "prom-client";
import type { Config } from "../config.ts";
import type { CommitSignals } from "../domain/live/live-feed-ports.ts";
import type { Services } from "../domain/services.ts";
import type { Clock } from "../domain/shared/clock.ts";
import { AddressGuard } from "./address-guard.ts";
import { DestinationRouter } from "./destinations/destination-router.ts";
import { WebhookMetrics } from "./webhook-metrics.ts";
import { WebhookSender } from "./webhook-sender.ts";
import { WebhookWorker } from "./webhook-worker.ts";

export interface WebhookWorkerDependencies {
  readonly services: Services;
  readonly config: Config;
  readonly clock: Clock;
  readonly registry: Registry;
  readonly log: FastifyBaseLogger;
  /** Commits of every instance (LISTEN/NOTIFY on PostgreSQL), so that events another instance wrote go out at once. */
  readonly commitSignals: CommitSignals;
  /** Whether an error means the database is away for a moment (outcomes are then written again). */
  readonly isDatabaseUnavailable: (error: unknown) => boolean;
  /** When tracing is on: a span per delivery attempt (src/tracing/webhook-spans.ts). */
  readonly tracer?: Tracer;
  /** Whether API reads wait for admission: backlog deliveries then yield to them (reads-first.ts). */
  readonly readsWaiting?: () => boolean;
}

/**
 * Starts this process's delivery worker (unless WEBHOOK_WORKER=off), woken whenever events commit (in this
 * process or, on PostgreSQL, in any instance) or a delivery is queued by hand. Returns a function that stops it (see WebhookWorker.stop).
 */
export function startWebhookWorker({
  services,
  config,
  clock,
  registry,
  log,
  commitSignals,
  isDatabaseUnavailable,
  tracer,
  readsWaiting,
}: WebhookWorkerDependencies): () => Promise<void> {
  const metrics = new WebhookMetrics(registry, () => services.webhookDeliveries.countPending());
  if (!config.webhookWorkerEnabled) return async () => undefined;
  // Each kind has its own allow-list: an internal broker allowed does not open its range to HTTP webhooks.
  const guard = new AddressGuard(config.webhookAllowedCidrs);
  const brokerGuard = new AddressGuard(config.webhookBrokerAllowedCidrs, "WEBHOOK_BROKER_ALLOWED_CIDRS");
  const http = new WebhookSender({
    guard,
    timeoutMs: config.webhookTimeoutMs,
    // Endpoints may share a host: never let the agent queue one endpoint's request behind another's.
    connectionsPerOrigin: config.webhookConcurrency,
    tracer,
  });
  const worker = new WebhookWorker(
    services.webhookDeliveries,
    new DestinationRouter(http, {
      guard: brokerGuard,
      timeoutMs: config.webhookTimeoutMs,
      extraCaCertificates: config.webhookBrokerCaCertificates,
    }),
    clock,
    metrics,
    log.child({ component: "webhooks" }),
    {
      concurrency: config.webhookConcurrency,
      concurrencyPerOrganization: config.webhookConcurrencyPerOrganization,
      concurrencyPerEndpoint: config.webhookConcurrencyPerEndpoint,
      pollIntervalMs: config.webhookPollIntervalMs,
      timeoutMs: config.webhookTimeoutMs,
      isDatabaseUnavailable,
      readsWaiting,
    },
  );
  // This process's commits wake the worker directly, those that queued deliveries only: a wake-up claims, and
  // under a write feed to an organization without endpoints a claim per commit cost the reads beside it about a
  // fifth of their throughput (docs/benchmarks.md). The commit signals add the other instances' commits, which
  // would otherwise wait for the next poll; in-process signals only repeat this process's own.
  const unsubscribeEvents = services.commits.onEventsCommitted((_events, committed) => {
    if (committed.queuedDeliveries) worker.wake();
  });
  const unsubscribeSignals = commitSignals.crossProcess ? commitSignals.onSignal(() => worker.wake()) : () => {};
  const unsubscribeQueued = services.webhooks.onQueued(() => worker.wake());
  const unsubscribeScheduled = services.webhookRecovery.onScheduled(() => worker.wake());
  worker.start();
  return async () => {
    unsubscribeEvents();
    unsubscribeSignals();
    unsubscribeQueued();
    unsubscribeScheduled();
    await worker.stop();
  };
}
