import { registerJsonBodyParser } from "./json-body-parser.ts";
import Fastify, { type FastifyInstance } from "fastify";
import { Gauge } from "prom-client";
import { ReadAdmissionGate } from "./pipeline/admission/read-admission-gate.ts";
import { buildServices } from "./build-services.ts";
import { loadWebhookSecretKey, type Config } from "./config.ts";
import { pruneExpiredIdempotencyRecords, type IdempotencyStore } from "./domain/idempotency/idempotency-store.ts";
import type { CommitSignals } from "./domain/live/live-feed-ports.ts";
import { FeedEventWaiters } from "./live/event-waiters.ts";
import { LiveFeed } from "./live/live-feed.ts";
import { LiveSubscriptions } from "./live/live-subscriptions.ts";
import type { Services } from "./domain/services.ts";
import { systemClock, type Clock } from "./domain/shared/clock.ts";
import { DeliveryActivityService } from "./domain/webhooks/delivery-activity.ts";
import { GRAPHQL_ENDPOINT, registerGraphql } from "./graphql/graphql-server.ts";
import { buildGraphqlSchema } from "./graphql/schema.ts";
import { registerSubscriptions } from "./graphql/subscription-server.ts";
import { registerSseSubscriptions } from "./graphql/sse-server.ts";
import { PreparedDocuments } from "./pipeline/documents/prepared-documents.ts";
import { GraphqlPipeline } from "./pipeline/graphql-pipeline.ts";
import type { StageTimings } from "./pipeline/stage-timings.ts";
import { loggerOptions } from "./logging.ts";
import { countContendedUnits, registerOperations } from "./operations.ts";
import { registerOperatorPage } from "./operator/operator-page.ts";
import { sendProblem, toProblem } from "./rest/problem.ts";
import { registerRest } from "./rest/rest-api.ts";
import { registerReadAdmission } from "./rest/read-admission.hooks.ts";
import { REST_ROUTE_GROUPS } from "./rest/routes/route-groups.ts";
import { ReadCache } from "./pipeline/read-cache/read-cache.ts";
import { isDatabaseUnavailableError } from "./store/database-availability.ts";
import { openDeliveryChangeSignals } from "./store/signals/delivery-signals.ts";
import { openCommitSignals } from "./store/signals/commit-signals.ts";
import { findPendingMigrations, listMigrations } from "./store/prisma/migration-runner.ts";
import { SqlLiveLogStore } from "./store/sql/live-log-store.ts";
import type { Database } from "./store/database.ts";
import { SqlIdempotencyRepository } from "./store/sql/idempotency-repository.ts";
import { SecretCipher } from "./store/secret-cipher.ts";
import { SqlWebhookEndpointRepository } from "./store/sql/webhook-endpoint-repository.ts";
import { TableUpkeep } from "./store/sql/table-upkeep.ts";
import { startWebhookWorker } from "./webhooks/webhook-runtime.ts";
import { startTracing, type SpanDestination } from "./tracing/tracing.ts";
import { traceHttpRequests } from "./tracing/http-spans.ts";
import { withTracedStatements } from "./store/sql/traced-executor.ts";

export interface AppDependencies {
  readonly config: Config;
  readonly database: Database;
  readonly clock?: Clock;
  /** Where spans go instead of the exporter the OTEL_* settings name (tests and the bench: an in-memory one). */
  readonly spans?: SpanDestination;
  /**
   * The bench's "budget off" server (bench/bench-app.ts, BENCH_BUDGET=off), and nothing else's: no request is
   * charged, settled or told its cost, so that the bench can measure the budget's whole cost on a request beside
   * the same server with it. No setting reaches it: SPEC §13 has every GraphQL response of a real server publish
   * `extensions.cost`, and src/main.ts never sets it.
   */
  readonly withoutCostBudget?: boolean;
  /** The bench's measure of each pipeline stage (bench/pipeline-stages.ts); a server has none. */
  readonly stageTimings?: StageTimings;
}

export interface App {
  readonly http: FastifyInstance;
  readonly services: Services;
  /** Stops accepting, finishes in-flight requests, then closes the database. */
  close(): Promise<void>;
}

/** The composition root: database -> store -> services (build-services.ts) -> adapters (REST, GraphQL, operations). */
export async function buildApp({
  config,
  database: opened,
  clock = systemClock,
  spans,
  withoutCostBudget = false,
  stageTimings,
}: AppDependencies): Promise<App> {
  // Traces (src/tracing/): off unless the OTEL_* settings ask for them; when off, nothing of the SDK is loaded.
  const tracing = await startTracing(config.tracing, spans);
  const tracer = tracing?.tracer;
  const database = tracer ? withTracedStatements(opened, tracer) : opened;
  // Read now, not on first use: a server without its key must refuse to start (production) rather than fail later.
  const secretCipher = new SecretCipher(loadWebhookSecretKey(config));
  const services = buildServices(config, database, clock, secretCipher);
  const http = Fastify({
    ...(await loggerOptions(config)),
    bodyLimit: config.bodyLimitBytes,
    // Behind a proxy the operator sets this; the rate limiter falls back to the client address.
    trustProxy: false,
    // During shutdown a request that arrives on a connection kept alive from before is served, with `Connection:
    // close` (Fastify adds it), rather than refused with Fastify's own 503 body: the instance still holds its
    // database until the requests in flight are done, and a client can resend a refused write only if it knows
    // the write is safe to repeat. Shutdown stays bounded (src/main.ts).
    return503OnClosing: false,
    // Errors the router raises before any route runs (an over-long path parameter, a malformed URL) answer in
    // the same problem+json shape as every other error.
    frameworkErrors: (error, request, reply) =>
      sendProblem(reply, toProblem(error, request, isDatabaseUnavailableError)),
    forceCloseConnections: "idle",
  });
  registerJsonBodyParser(http);

  // Migrations listed once: the files do not change while the process runs.
  const migrations = listMigrations(database.provider);
  const metricsRegistry = await registerOperations(http, {
    config,
    databaseProvider: database.provider,
    findPendingMigrations: () => findPendingMigrations(database, migrations),
    statementCaches: () => database.sql.statementCaches(),
  });
  const stopCountingContention = countContendedUnits(metricsRegistry, services.commits);
  // Reads that the read cache cannot answer wait for admission; writes never do (src/pipeline/admission/).
  const readAdmission = new ReadAdmissionGate(
    {
      readsPerTurn: config.readsPerTurn,
      maxReadsInFlight: config.maxReadsInFlight,
      turnTargetMs: config.readTurnTargetMs,
    },
    metricsRegistry,
  );
  registerReadAdmission(http, readAdmission);
  // After the admission's hooks, which may hold a read before its handler (src/tracing/http-spans.ts).
  if (tracer) traceHttpRequests(http, tracer, new Set([GRAPHQL_ENDPOINT]));
  // One per instance, shared by REST and GraphQL; exact on every instance (src/pipeline/read-cache/).
  const readCache = new ReadCache({ maxBytes: config.readCacheMaxBytes, registry: metricsRegistry });
  const idempotency = new SqlIdempotencyRepository(database, clock, secretCipher);
  const budgets = withoutCostBudget ? null : services.budgets;
  await registerRest(http, {
    services,
    config,
    idempotency,
    clock,
    isServiceUnavailable: isDatabaseUnavailableError,
    readCache,
    routeGroups: REST_ROUTE_GROUPS,
    budgets,
  });
  // One executable schema, served over HTTP (Apollo), WebSocket (graphql-ws) and Server-Sent Events, and one
  // request pipeline for every GraphQL operation on any of them (src/pipeline/graphql-pipeline.ts).
  const schema = buildGraphqlSchema();
  const pipeline = new GraphqlPipeline({
    services,
    budgets,
    readCache,
    documents: new PreparedDocuments(schema, config, metricsRegistry),
    isServiceUnavailable: isDatabaseUnavailableError,
    timings: stageTimings,
  });
  await registerGraphql(http, {
    schema,
    services,
    config,
    pipeline,
    isServiceUnavailable: isDatabaseUnavailableError,
    waitForReadTurn: (reply, organizationId) => readAdmission.holdRead(reply.raw, organizationId),
    tracer,
    registry: metricsRegistry,
  });
  await registerOperatorPage(http);
  // The operator page's live feed: attempts recorded by any instance's worker, and deliveries queued by hand.
  const deliverySignals = await openDeliveryChangeSignals(database, http.log.child({ component: "delivery-signals" }));
  const stopAttemptSignals = services.webhookDeliveries.onAttemptsRecorded((changes) =>
    deliverySignals.publish(changes),
  );
  services.webhookRecovery.onReplayFailed((error, endpointId) =>
    http.log.error(
      { err: error, endpointId },
      endpointId ? "webhook replay stopped before its last batch" : "could not look for webhook replays to resume",
    ),
  );
  const stopQueuedSignals = services.webhooks.onQueued((delivery) =>
    deliverySignals.publish([
      { organizationId: delivery.organizationId, endpointId: delivery.endpointId, deliveryId: delivery.id },
    ]),
  );
  // "Events committed" for the live side and the webhook worker: in-process on SQLite, LISTEN/NOTIFY on PostgreSQL.
  const commitSignals = await openCommitSignals(database, http.log.child({ component: "commit-signals" }));
  const subscriptions = await startLiveSubscriptions(services, config, database, commitSignals, http);
  new Gauge({
    name: "reftrail_feed_waiting_polls",
    help: "Long polls of GET /v1/events waiting for an event on this instance",
    registers: [metricsRegistry],
    collect() {
      this.set(services.eventFeed.waitingPolls);
    },
  });
  const deliveryActivity = new DeliveryActivityService(deliverySignals, services.webhooks);
  await registerSubscriptions(http, {
    schema,
    services,
    isServiceUnavailable: isDatabaseUnavailableError,
    config,
    subscriptions,
    metrics: metricsRegistry,
    deliveryActivity,
    pipeline,
    tracer,
  });
  // The same subscriptions over Server-Sent Events (graphql-sse), at /graphql/stream.
  await registerSseSubscriptions(http, {
    schema,
    services,
    isServiceUnavailable: isDatabaseUnavailableError,
    config,
    subscriptions,
    deliveryActivity,
    pipeline,
    tracer,
  });

  const encrypted = await new SqlWebhookEndpointRepository(
    database.provider,
    database.sql,
    secretCipher,
  ).encryptPlaintextSecrets();
  if (encrypted > 0) http.log.info({ endpoints: encrypted }, "encrypted webhook secrets stored in plain text");

  // PostgreSQL: the log's months around now, before the first event needs one (the retention job keeps them
  // ahead; a month still missing is made by the insert that needs it).
  await services.lifecycleLog.prepareMonths();
  const stopRetentionJob = startRetentionJob(services, idempotency, config, clock, http);
  // PostgreSQL without autovacuum: the server vacuums the tables it churns itself (src/store/sql/table-upkeep.ts).
  const tableUpkeep =
    database.provider === "postgres"
      ? new TableUpkeep(database.url, config.vacuumCheckIntervalMs, http.log.child({ component: "vacuum" }))
      : null;
  tableUpkeep?.start();
  // Replays left by a stopped or dead instance are resumed by the instances that do webhook work in the background
  // (an instance with WEBHOOK_WORKER=off still schedules the replays it is asked for).
  if (config.webhookWorkerEnabled) services.webhookRecovery.start();
  const stopWebhookWorker = startWebhookWorker({
    services,
    config,
    clock,
    registry: metricsRegistry,
    log: http.log,
    commitSignals,
    isDatabaseUnavailable: isDatabaseUnavailableError,
    readsWaiting: () => readAdmission.readsWaiting > 0,
    tracer,
  });

  return {
    http,
    services,
    async close() {
      stopRetentionJob();
      await tableUpkeep?.stop();
      // Before the database closes: requests in flight finish (or give their leases back).
      await services.webhookRecovery.stop();
      await stopWebhookWorker();
      await http.close();
      stopAttemptSignals();
      stopQueuedSignals();
      stopCountingContention();
      await deliverySignals.close();
      // Refunds held back for the next charge are written before the database closes.
      await services.budgets.close().catch((error: unknown) => http.log.error({ err: error }, "budget refunds lost"));
      await database.close();
      // Last: the spans of everything above are exported before the process ends.
      await tracing?.shutdown();
    },
  };
}

/**
 * The live side (docs/decisions.md, "Subscriptions"): commit signals (in-process on SQLite, LISTEN/NOTIFY on
 * PostgreSQL) fed by every committed unit of work, one feed reading the log in live order, and the
 * subscriptions the GraphQL transport opens. Closed with the server: the feed after the sockets (preClose hooks
 * run in order, the transport's first), the LISTEN connection before the database.
 */
async function startLiveSubscriptions(
  services: Services,
  config: Config,
  database: Database,
  signals: CommitSignals,
  http: FastifyInstance,
): Promise<LiveSubscriptions> {
  const log = http.log.child({ component: "live" });
  const stopPublishing = services.commits.onEventsCommitted((events) => signals.publish(events));
  const store = new SqlLiveLogStore(database);
  const feed = new LiveFeed(store, signals, { pollIntervalMs: config.subscriptionPollIntervalMs }, log);
  const subscriptions = new LiveSubscriptions(
    feed,
    store,
    (organizationId, input) => services.eventFeed.resolveFilter(organizationId, input),
    services.eventFeed.streamCursors,
    () => services.lifecycleLog.retentionCutoff(),
    { maxQueuedEvents: config.subscriptionMaxQueuedEvents },
  );
  // Long polls of the feed to poll wait on the same feed: one read per commit serves them all.
  services.eventFeed.attachWaiters(new FeedEventWaiters(feed));
  // Waiting polls answer before the server waits for the requests in flight to end.
  http.addHook("preClose", async () => services.eventFeed.stopWaiting());
  http.addHook("onClose", async () => {
    await subscriptions.close();
    stopPublishing();
    await signals.close();
  });
  return subscriptions;
}

/**
 * Deletes lifecycle events past retention, succeeded webhook deliveries past theirs, and idempotency records past
 * their 24-hour window, on a timer, in bounded batches (at most 100 batches of 1,000 rows of each per run, so one
 * run never holds the database for long). Instances may run it concurrently: deletes are idempotent.
 */
function startRetentionJob(
  services: Services,
  idempotency: IdempotencyStore,
  config: Config,
  clock: Clock,
  http: FastifyInstance,
): () => void {
  if (config.retentionPruneIntervalMs === 0) return () => undefined;
  let running = false;
  const prune = async () => {
    const events = await services.lifecycleLog.pruneExpiredEvents(1_000, 100);
    if (events > 0) http.log.info({ deleted: events }, "pruned lifecycle events past retention");
    const deliveries = await services.webhookDeliveries.pruneSucceededDeliveries(1_000, 100);
    if (deliveries > 0) http.log.info({ deleted: deliveries }, "pruned succeeded webhook deliveries past retention");
    const records = await pruneExpiredIdempotencyRecords(idempotency, clock.now(), 1_000, 100);
    if (records > 0) http.log.info({ deleted: records }, "pruned idempotency records past their window");
    const auditEvents = await services.audit.pruneExpired();
    if (auditEvents > 0) http.log.info({ deleted: auditEvents }, "pruned audit events past 400 days");
  };
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    prune()
      .catch((error: unknown) => http.log.error({ err: error }, "retention job failed"))
      .finally(() => {
        running = false;
      });
  }, config.retentionPruneIntervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
