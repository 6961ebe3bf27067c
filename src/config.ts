import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { ConfigError, parseDuration, parseInteger, parsePositiveNumber, parseSwitch } from "./config-values.ts";

export { ConfigError, parseDuration };

/**
 * The only reader of `process.env`. Every setting has a working default so that `npm start` runs with no
 * configuration. src/settings-catalog.ts describes each variable read here (docs/settings.md is generated from it,
 * and test/settings-doc.test.ts fails when a variable read here is missing there).
 */
export interface Config {
  readonly port: number;
  readonly host: string;
  readonly databaseUrl: string;
  readonly nodeEnv: string;
  readonly isProduction: boolean;
  readonly logLevel: string;
  /** `pretty`: one readable line per record (the default when stdout is a terminal); `json`: one JSON object each. */
  readonly logFormat: LogFormat;
  /** Requests per minute per API key; `null` turns rate limiting off. */
  readonly rateLimitPerMinute: number | null;
  /**
   * Each API key's cost budget (docs/decisions.md, "Cost budgets"): what its bucket holds at most, and the cost
   * units it restores per second. A key may have its own (`reftrail key update`).
   */
  readonly costBudgetMaximum: number;
  readonly costBudgetRestoreRate: number;
  readonly bodyLimitBytes: number;
  readonly maxTagsPerReference: number;
  readonly maxTagsPerOrganization: number;
  /** Trusted documents one organization may hold in all (LIMIT_EXCEEDED beyond; issue 49.3). */
  readonly maxTrustedDocumentsPerOrganization: number;
  readonly extractionFailureThreshold: number;
  /**
   * `/metrics` access: a bearer token it requires (null: none), and a port of its own on HOST (null: served on
   * PORT beside the API). A production server with neither does not serve metrics at all.
   */
  readonly metricsToken: string | null;
  readonly metricsPort: number | null;
  readonly graphqlMaxDepth: number;
  readonly graphqlMaxAliases: number;
  readonly graphqlMaxTokens: number;
  readonly graphqlMaxCost: number;
  /** Selections (fields, fragment spreads, inline fragments) one operation may make once its fragments are expanded. */
  readonly graphqlMaxSelections: number;
  /** Key for the HMAC that makes page cursors tamper-evident. */
  readonly cursorSecret: string;
  readonly retentionMonths: number;
  /** How often the server deletes events past retention; 0 turns the job off (use `reftrail prune`). */
  readonly retentionPruneIntervalMs: number;
  /**
   * PostgreSQL: how often each instance looks for tables that autovacuum leaves alone and that need a vacuum or an
   * analyze (src/store/sql/table-upkeep.ts); 0 turns the looks off.
   */
  readonly vacuumCheckIntervalMs: number;
  /**
   * The AES-256-GCM key that encrypts webhook signing secrets at rest (WEBHOOK_SECRET_KEY); null when unset:
   * then `loadWebhookSecretKey` refuses in production and reads or creates `webhookSecretKeyFile` otherwise.
   */
  readonly webhookSecretKey: Buffer | null;
  /** Where a development key is kept: beside the SQLite file, or in ./data for PostgreSQL. */
  readonly webhookSecretKeyFile: string;
  /**
   * WEBHOOK_ALLOWED_CIDRS: what HTTP webhook endpoints may reach although it is not public unicast (private,
   * loopback, link-local...). Comma-separated entries `ADDRESS[/BITS][:PORT]` (IPv6 with a port in brackets:
   * `[fd00::/8]:8443`); an entry with a port allows that port only. Default `127.0.0.0/8,::1/128` outside
   * production, empty in production. Brokers have their own list (`webhookBrokerAllowedCidrs`).
   */
  readonly webhookAllowedCidrs: readonly string[];
  /**
   * WEBHOOK_BROKER_ALLOWED_CIDRS: the same for RabbitMQ and NATS destinations, so that allowing an internal broker
   * (`10.0.0.5:5672`) does not open that range to every tenant's HTTP webhooks, nor the broker's other ports.
   * Same syntax and default as WEBHOOK_ALLOWED_CIDRS.
   */
  readonly webhookBrokerAllowedCidrs: readonly string[];
  readonly webhookRetryScheduleMs: readonly number[];
  readonly webhookTimeoutMs: number;
  /**
   * PEM certificates of authorities trusted, beside Node's own, to sign a broker's TLS certificate
   * (WEBHOOK_BROKER_CA_FILE: a private CA's brokers, `amqps://` and NATS `tls://`); null: Node's own only.
   */
  readonly webhookBrokerCaCertificates: string | null;
  /** An endpoint whose deliveries have failed without a success for this long is disabled. */
  readonly webhookDisableAfterMs: number;
  /** Succeeded deliveries and their attempts are pruned this long after they succeeded. */
  readonly webhookDeliveryRetentionMs: number;
  /** How long a claimed delivery stays reserved for one instance; a dead instance's claims expire after it. */
  readonly webhookLeaseMs: number;
  /** Requests in flight at once per instance, over all endpoints. */
  readonly webhookConcurrency: number;
  /** Requests in flight at once per instance to one endpoint, so one slow endpoint cannot hold back others. */
  readonly webhookConcurrencyPerEndpoint: number;
  /**
   * Requests in flight at once per instance to the endpoints of one organization, so that one organization's
   * receivers that never answer leave slots to the others (issue 49.1).
   */
  readonly webhookConcurrencyPerOrganization: number;
  /** Events a webhook replay reads and schedules per batch (one short transaction each). */
  readonly webhookReplayBatchSize: number;
  /** How often the worker looks for due deliveries when nothing wakes it earlier. */
  readonly webhookPollIntervalMs: number;
  /** Whether this instance runs the delivery worker (an instance may serve the API only). */
  readonly webhookWorkerEnabled: boolean;
  /**
   * Live subscriptions (docs/decisions.md, "Subscriptions"): how often the log is read when no commit signal
   * arrives (a safety net: commits wake the readers at once), how many events
   * one subscription may hold for a client that reads slowly before it falls back to reading the log, how often
   * the keys of open connections are checked for revocation, and how many operations one connection may run.
   */
  readonly subscriptionPollIntervalMs: number;
  readonly subscriptionMaxQueuedEvents: number;
  readonly subscriptionAuthRecheckIntervalMs: number;
  readonly subscriptionMaxOperationsPerConnection: number;
  /** Server-Sent Events streams open at once per organization on one instance (src/graphql/sse-server.ts). */
  readonly subscriptionMaxStreamsPerOrganization: number;
  /** Long polls of `GET /v1/events` waiting at once per organization on one instance (then 429). */
  readonly eventFeedMaxWaitingPollsPerOrganization: number;
  /** The bytes of responses the read cache keeps per instance (src/pipeline/read-cache/); 0 turns it off. */
  readonly readCacheMaxBytes: number;
  /** SQLite: whether pages of references are read on a thread of their own beside the event loop (SQLITE_READ_THREAD). */
  readonly sqliteReadThread: boolean;
  /**
   * Reads admitted per event-loop turn, at most, and at once (src/pipeline/admission/): the rest wait, so that writes and
   * new connections are served between shares of the reads rather than behind all of them.
   */
  readonly readsPerTurn: number;
  readonly maxReadsInFlight: number;
  /**
   * READ_TURN_TARGET: how long an event-loop turn serving waiting reads aims to last (src/pipeline/admission/). Shorter on
   * PostgreSQL, where a write waits for a turn at each of its three round trips; on SQLite it runs in one turn.
   */
  readonly readTurnTargetMs: number;
  /** OpenTelemetry traces (src/tracing/): null when off, the default. */
  readonly tracing: TracingSettings | null;
}

/**
 * Half the worker's slots, so that one organization's dead receivers leave the other half free; at least two
 * endpoints' worth, so that one of its endpoints that never answers leaves another of its own a slot (never more
 * than every slot).
 */
function defaultConcurrencyPerOrganization(concurrency: number, perEndpoint: number): number {
  return Math.min(concurrency, Math.max(Math.ceil(concurrency / 2), 2 * perEndpoint));
}

export type LogFormat = "json" | "pretty";

/**
 * `env` is the environment to read; `stdoutIsTerminal` decides the default log format (readable lines for a
 * person at a terminal, JSON for a log collector).
 */
export function loadConfig(
  env: NodeJS.ProcessEnv = process.env,
  stdoutIsTerminal: boolean = process.stdout.isTTY === true,
): Config {
  const nodeEnv = env.NODE_ENV ?? "development";
  const isProduction = nodeEnv === "production";
  const rateLimitRaw = env.RATE_LIMIT_PER_MINUTE;
  const rateLimitPerMinute =
    rateLimitRaw === undefined || rateLimitRaw === ""
      ? isProduction
        ? 600
        : null
      : rateLimitRaw === "0" || rateLimitRaw === "off"
        ? null
        : parseInteger(env, "RATE_LIMIT_PER_MINUTE", 600, 1);
  const defaultCidrs = isProduction ? "" : "127.0.0.0/8,::1/128";
  const cidrs = env.WEBHOOK_ALLOWED_CIDRS ?? defaultCidrs;
  const brokerCidrs = env.WEBHOOK_BROKER_ALLOWED_CIDRS ?? defaultCidrs;
  const schedule = env.WEBHOOK_RETRY_SCHEDULE ?? "0s,5s,5m,30m,2h,5h,10h,10h";
  // Off by default in tests: a vacuum's ANALYZE between a test's own ANALYZE and its EXPLAIN would change plans.
  const vacuumCheck = env.VACUUM_CHECK_INTERVAL ?? (nodeEnv === "test" ? "off" : "10s");
  const webhookTimeoutMs = parseDuration(env.WEBHOOK_TIMEOUT ?? "15s", "WEBHOOK_TIMEOUT");
  const webhookLeaseMs = parseDuration(env.WEBHOOK_LEASE ?? "30s", "WEBHOOK_LEASE");
  const webhookConcurrency = parseInteger(env, "WEBHOOK_CONCURRENCY", 50, 1);
  const webhookConcurrencyPerEndpoint = parseInteger(env, "WEBHOOK_CONCURRENCY_PER_ENDPOINT", 10, 1);
  // A lease shorter than a request could expire while the request is still running, and a second instance
  // would send the same delivery again: require room for the request and for recording its outcome.
  if (webhookLeaseMs < webhookTimeoutMs + 1_000) {
    throw new ConfigError(
      `WEBHOOK_LEASE (${webhookLeaseMs} ms) must exceed WEBHOOK_TIMEOUT (${webhookTimeoutMs} ms) by at least 1s`,
    );
  }
  // Cursors only ever address the caller's own data, so the default key leaks nothing; it only lets a
  // client forge a cursor it could have paged to anyway. Deployments may still set their own.
  const cursorSecret = env.CURSOR_SECRET ?? "reftrail-default-cursor-secret";
  const databaseUrl = env.DATABASE_URL ?? "file:./data/reftrail.db";
  const webhookSecretKey = parseSecretKey(env.WEBHOOK_SECRET_KEY);
  return {
    port: parseInteger(env, "PORT", 4000),
    host: env.HOST ?? "0.0.0.0",
    databaseUrl,
    nodeEnv,
    isProduction,
    logLevel: env.LOG_LEVEL ?? (nodeEnv === "test" ? "warn" : "info"),
    logFormat: parseLogFormat(env.LOG_FORMAT, stdoutIsTerminal),
    rateLimitPerMinute,
    costBudgetMaximum: parsePositiveNumber(env, "COST_BUDGET_MAXIMUM", 100_000),
    costBudgetRestoreRate: parsePositiveNumber(env, "COST_BUDGET_RESTORE_RATE", 50_000),
    bodyLimitBytes: parseInteger(env, "BODY_LIMIT_BYTES", 1_048_576, 1),
    maxTagsPerReference: parseInteger(env, "MAX_TAGS_PER_REFERENCE", 50, 1),
    maxTagsPerOrganization: parseInteger(env, "MAX_TAGS_PER_ORGANIZATION", 10_000, 1),
    maxTrustedDocumentsPerOrganization: parseInteger(env, "MAX_TRUSTED_DOCUMENTS_PER_ORGANIZATION", 20_000, 1),
    extractionFailureThreshold: parseInteger(env, "EXTRACTION_FAILURE_THRESHOLD", 10, 1),
    metricsToken: env.METRICS_TOKEN?.trim() || null,
    metricsPort:
      env.METRICS_PORT === undefined || env.METRICS_PORT === "" ? null : parseInteger(env, "METRICS_PORT", 0),
    graphqlMaxDepth: parseInteger(env, "GRAPHQL_MAX_DEPTH", 12, 1),
    graphqlMaxAliases: parseInteger(env, "GRAPHQL_MAX_ALIASES", 30, 1),
    graphqlMaxTokens: parseInteger(env, "GRAPHQL_MAX_TOKENS", 10_000, 1),
    graphqlMaxCost: parseInteger(env, "GRAPHQL_MAX_COST", 50_000, 1),
    graphqlMaxSelections: parseInteger(env, "GRAPHQL_MAX_SELECTIONS", 10_000, 1),
    cursorSecret,
    retentionMonths: parseInteger(env, "RETENTION_MONTHS", 18, 1),
    retentionPruneIntervalMs:
      env.RETENTION_PRUNE_INTERVAL === "0"
        ? 0
        : parseDuration(env.RETENTION_PRUNE_INTERVAL ?? "1h", "RETENTION_PRUNE_INTERVAL"),
    vacuumCheckIntervalMs:
      vacuumCheck === "0" || vacuumCheck === "off" ? 0 : parseDuration(vacuumCheck, "VACUUM_CHECK_INTERVAL"),
    webhookSecretKey,
    webhookSecretKeyFile: developmentKeyFile(databaseUrl),
    webhookAllowedCidrs: cidrs
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
    webhookBrokerAllowedCidrs: brokerCidrs
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
    webhookRetryScheduleMs: schedule.split(",").map((part) => parseDuration(part, "WEBHOOK_RETRY_SCHEDULE")),
    webhookTimeoutMs,
    webhookBrokerCaCertificates: brokerCaCertificates(env.WEBHOOK_BROKER_CA_FILE),
    webhookDisableAfterMs: parseDuration(env.WEBHOOK_DISABLE_AFTER ?? "5d", "WEBHOOK_DISABLE_AFTER"),
    webhookDeliveryRetentionMs: parseDuration(env.WEBHOOK_DELIVERY_RETENTION ?? "30d", "WEBHOOK_DELIVERY_RETENTION"),
    webhookLeaseMs,
    webhookConcurrency,
    webhookConcurrencyPerEndpoint,
    webhookConcurrencyPerOrganization: parseInteger(
      env,
      "WEBHOOK_CONCURRENCY_PER_ORGANIZATION",
      defaultConcurrencyPerOrganization(webhookConcurrency, webhookConcurrencyPerEndpoint),
      1,
    ),
    webhookReplayBatchSize: parseInteger(env, "WEBHOOK_REPLAY_BATCH_SIZE", 1_000, 1),
    webhookPollIntervalMs: Math.max(10, parseDuration(env.WEBHOOK_POLL_INTERVAL ?? "500ms", "WEBHOOK_POLL_INTERVAL")),
    webhookWorkerEnabled: parseSwitch(env, "WEBHOOK_WORKER", true),
    subscriptionPollIntervalMs: Math.max(
      10,
      parseDuration(env.SUBSCRIPTION_POLL_INTERVAL ?? "1s", "SUBSCRIPTION_POLL_INTERVAL"),
    ),
    subscriptionMaxQueuedEvents: parseInteger(env, "SUBSCRIPTION_MAX_QUEUED_EVENTS", 1_000, 1),
    subscriptionAuthRecheckIntervalMs: Math.max(
      10,
      parseDuration(env.SUBSCRIPTION_AUTH_RECHECK_INTERVAL ?? "5s", "SUBSCRIPTION_AUTH_RECHECK_INTERVAL"),
    ),
    subscriptionMaxOperationsPerConnection: parseInteger(env, "SUBSCRIPTION_MAX_OPERATIONS_PER_CONNECTION", 100, 1),
    subscriptionMaxStreamsPerOrganization: parseInteger(env, "SUBSCRIPTION_MAX_STREAMS_PER_ORGANIZATION", 100, 1),
    eventFeedMaxWaitingPollsPerOrganization: parseInteger(env, "FEED_MAX_WAITING_POLLS_PER_ORGANIZATION", 1_000, 1),
    readCacheMaxBytes: parseInteger(env, "READ_CACHE_MAX_BYTES", 64 * 1024 * 1024),
    sqliteReadThread: parseSwitch(env, "SQLITE_READ_THREAD", true),
    readsPerTurn: parseInteger(env, "READS_PER_TURN", 64, 1),
    readTurnTargetMs: parseDuration(
      env.READ_TURN_TARGET ?? (databaseUrl.startsWith("postgres") ? "7ms" : "10ms"),
      "READ_TURN_TARGET",
    ),
    maxReadsInFlight: parseInteger(env, "MAX_READS_IN_FLIGHT", 64, 1),
    tracing: parseTracing(env),
  };
}

// --- Traces (issue 37) -------------------------------------------------------------------------------------------

/** Where spans go when tracing is on. The SDK reads the exporter's own OTEL_EXPORTER_OTLP_* settings itself. */
export interface TracingSettings {
  /** `otlp`: OTLP over HTTP (JSON) to OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT; `console`: spans on stdout. */
  readonly exporter: "otlp" | "console";
  /** The `service.name` resource attribute (OTEL_SERVICE_NAME). */
  readonly serviceName: string;
}

/**
 * Tracing is on when the standard OpenTelemetry settings ask for an exporter: OTEL_EXPORTER_OTLP_ENDPOINT or
 * OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, or OTEL_TRACES_EXPORTER naming one (`otlp`, `console`; `none` is off).
 * OTEL_SDK_DISABLED=true turns it off whatever else is set.
 */
function parseTracing(env: NodeJS.ProcessEnv): TracingSettings | null {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === "true") return null;
  const named = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase();
  const endpoint = Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
  let exporter: TracingSettings["exporter"] | null;
  if (named === undefined || named === "") exporter = endpoint ? "otlp" : null;
  else if (named === "none") exporter = null;
  else if (named === "otlp" || named === "console") exporter = named;
  else throw new ConfigError(`OTEL_TRACES_EXPORTER: "${env.OTEL_TRACES_EXPORTER}" is not otlp, console or none`);
  if (exporter === null) return null;
  return { exporter, serviceName: env.OTEL_SERVICE_NAME?.trim() || "reftrail" };
}

function parseLogFormat(raw: string | undefined, stdoutIsTerminal: boolean): LogFormat {
  const value = raw?.trim().toLowerCase();
  if (value === undefined || value === "") return stdoutIsTerminal ? "pretty" : "json";
  if (value === "json" || value === "pretty") return value;
  throw new ConfigError(`LOG_FORMAT: "${raw}" is not json or pretty`);
}

const SECRET_KEY_BYTES = 32;

/** WEBHOOK_SECRET_KEY: 32 bytes as 64 hex digits or as base64 (standard or URL alphabet). */
function parseSecretKey(raw: string | undefined): Buffer | null {
  const text = raw?.trim();
  if (text === undefined || text === "") return null;
  const key = /^[0-9a-fA-F]{64}$/.test(text)
    ? Buffer.from(text, "hex")
    : /^[A-Za-z0-9+/_-]+={0,2}$/.test(text)
      ? Buffer.from(text, "base64")
      : Buffer.alloc(0);
  if (key.length !== SECRET_KEY_BYTES) {
    throw new ConfigError(
      "WEBHOOK_SECRET_KEY must be 32 bytes as base64 or 64 hex digits: make one with `openssl rand -base64 32`",
    );
  }
  return key;
}

function developmentKeyFile(databaseUrl: string): string {
  const folder = databaseUrl.startsWith("file:")
    ? dirname(resolve(databaseUrl.slice("file:".length).replace(/\?.*$/, "")))
    : resolve("data");
  return join(folder, "webhook-secret.key");
}

/**
 * The key that encrypts webhook secrets: WEBHOOK_SECRET_KEY when set. Production has no fallback: a key made up
 * on one machine would leave the secrets unreadable to every other instance. Elsewhere, the development key
 * file, created on first use with random bytes and mode 0600 (the owner alone may read it) and reused
 * afterwards, so that secrets stored before a restart still decrypt.
 * @throws ConfigError in production without WEBHOOK_SECRET_KEY, with a one-line message saying how to make one.
 */
export function loadWebhookSecretKey(config: Config): Buffer {
  if (config.webhookSecretKey) return config.webhookSecretKey;
  if (config.isProduction) {
    throw new ConfigError(
      "WEBHOOK_SECRET_KEY is required in production (32 bytes, base64 or hex): make one with `openssl rand -base64 32`",
    );
  }
  const path = config.webhookSecretKeyFile;
  mkdirSync(dirname(path), { recursive: true });
  try {
    // "wx": create only if absent, so that two instances starting together keep the first one's key.
    writeFileSync(path, `${randomBytes(SECRET_KEY_BYTES).toString("base64")}\n`, { mode: 0o600, flag: "wx" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  const key = Buffer.from(readFileSync(path, "utf8").trim(), "base64");
  // Never replaced silently: secrets stored under the old key could not be decrypted any more.
  if (key.length !== SECRET_KEY_BYTES) throw new ConfigError(`${path} does not hold a 32-byte base64 key`);
  return key;
}

/** The PEM certificates of WEBHOOK_BROKER_CA_FILE, read once at start; a file that holds none is refused. */
function brokerCaCertificates(path: string | undefined): string | null {
  if (path === undefined || path === "") return null;
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new ConfigError(`WEBHOOK_BROKER_CA_FILE: ${path} cannot be read (${(error as Error).message})`);
  }
  if (!text.includes("-----BEGIN CERTIFICATE-----"))
    throw new ConfigError(`WEBHOOK_BROKER_CA_FILE: ${path} holds no PEM certificate`);
  return text;
}
