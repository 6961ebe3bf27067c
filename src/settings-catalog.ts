/*
 * Every setting the server reads, described once (issue 51): src/config.ts parses them, this catalog says what each
 * one is for, and docs/settings.md is generated from it (`npm run docs:settings`). test/settings-doc.test.ts fails
 * when the page differs from what this catalog generates, or when src/config.ts reads a name the catalog lacks (or
 * the other way round), so a new setting cannot go undocumented.
 */

/** The groups of docs/settings.md, in the page's order. */
export type SettingGroup = "server" | "limits" | "graphql" | "data" | "webhooks" | "live" | "reads" | "traces";

export const SETTING_GROUP_TITLES: Readonly<Record<SettingGroup, string>> = {
  server: "The server",
  limits: "Limits and budgets",
  graphql: "GraphQL documents",
  data: "Data, retention and upkeep",
  webhooks: "Webhooks",
  live: "Subscriptions and the feed",
  reads: "Reads: cache and admission",
  traces: "Traces",
};

/** One environment variable: its name, its default as a reader should understand it, and what it does. */
export interface SettingDescription {
  readonly name: string;
  readonly group: SettingGroup;
  /** Markdown: the default value, or what happens when the variable is unset. */
  readonly default: string;
  /** Markdown: what the setting does and which values it takes. */
  readonly description: string;
}

/** Every variable `loadConfig` reads, in the page's order. */
export const SETTINGS: readonly SettingDescription[] = [
  {
    name: "PORT",
    group: "server",
    default: "`4000`",
    description: "HTTP port (GraphQL, REST, operations)",
  },
  {
    name: "HOST",
    group: "server",
    default: "`0.0.0.0`",
    description: "interface to listen on",
  },
  {
    name: "DATABASE_URL",
    group: "server",
    default: "`file:./data/reftrail.db`",
    description: "`file:<path>` for SQLite, `postgresql://\u2026` for PostgreSQL",
  },
  {
    name: "NODE_ENV",
    group: "server",
    default: "`development`",
    description: "`production` disables the default organization and turns rate limiting on",
  },
  {
    name: "LOG_LEVEL",
    group: "server",
    default: "`info`",
    description: "pino level: `trace` \u2026 `fatal`, `silent`",
  },
  {
    name: "LOG_FORMAT",
    group: "server",
    default: "`pretty` when stdout is a terminal, else `json`",
    description:
      "`pretty`: one readable line per log record and per request (pino-pretty); `json`: pino's JSON records, one per line, for a log collector. Every start also prints (or, in `json`, logs) the explorer, operator page, OpenAPI and health URLs",
  },
  {
    name: "METRICS_TOKEN",
    group: "server",
    default: "none",
    description: "bearer token `/metrics` requires (`Authorization: Bearer <token>`; API keys do not open it)",
  },
  {
    name: "METRICS_PORT",
    group: "server",
    default: "none (on `PORT`)",
    description:
      "serve `/metrics` on this port of `HOST` only, e.g. one the load balancer does not expose. In production, with neither setting `/metrics` is not served",
  },
  {
    name: "RATE_LIMIT_PER_MINUTE",
    group: "limits",
    default: "off (600 in production)",
    description:
      "requests per minute per API key, counted by each instance on its own (a coarse guard against request floods; the cost budget below is the limit shared by every instance); `0`/`off` disables",
  },
  {
    name: "COST_BUDGET_MAXIMUM",
    group: "limits",
    default: "`100000`",
    description:
      "what each API key's cost budget holds at most, in cost units ([Cost budgets](graphql.md#cost-budgets)); a key may have its own (`key update --budget-maximum`)",
  },
  {
    name: "COST_BUDGET_RESTORE_RATE",
    group: "limits",
    default: "`50000`",
    description:
      "cost units each API key's budget restores per second (fractions allowed); a key may have its own (`key update --budget-restore-rate`)",
  },
  {
    name: "BODY_LIMIT_BYTES",
    group: "limits",
    default: "`1048576`",
    description: "largest accepted request body (413 beyond)",
  },
  {
    name: "MAX_TAGS_PER_REFERENCE",
    group: "limits",
    default: "`50`",
    description: "tags on one reference (422 `LIMIT_EXCEEDED` beyond)",
  },
  {
    name: "MAX_TAGS_PER_ORGANIZATION",
    group: "limits",
    default: "`10000`",
    description: "tags in one organization",
  },
  {
    name: "MAX_TRUSTED_DOCUMENTS_PER_ORGANIZATION",
    group: "limits",
    default: "`20000`",
    description:
      "trusted documents one organization may hold in all (422 `LIMIT_EXCEEDED` for a registration that would pass it; none of its documents is kept)",
  },
  {
    name: "EXTRACTION_FAILURE_THRESHOLD",
    group: "limits",
    default: "`10`",
    description: "consecutive failed extractions before automatic deactivation",
  },
  {
    name: "GRAPHQL_MAX_DEPTH",
    group: "graphql",
    default: "`12`",
    description: "deepest GraphQL selection accepted",
  },
  {
    name: "GRAPHQL_MAX_ALIASES",
    group: "graphql",
    default: "`30`",
    description: "aliased fields in one GraphQL operation (`__typename` aliases are free)",
  },
  {
    name: "GRAPHQL_MAX_TOKENS",
    group: "graphql",
    default: "`10000`",
    description: "lexical tokens in one GraphQL document; parsing stops beyond (`GRAPHQL_PARSE_FAILED`)",
  },
  {
    name: "GRAPHQL_MAX_COST",
    group: "graphql",
    default: "`50000`",
    description: "GraphQL cost limit (connections cost their page size times their selection)",
  },
  {
    name: "GRAPHQL_MAX_SELECTIONS",
    group: "graphql",
    default: "`10000`",
    description:
      "selections (fields, fragment spreads, inline fragments) one GraphQL operation makes once its fragments are expanded; checked right after parsing, before validation",
  },
  {
    name: "CURSOR_SECRET",
    group: "data",
    default: "built-in",
    description: "HMAC key that makes page cursors tamper-evident; set the same value on every instance",
  },
  {
    name: "RETENTION_MONTHS",
    group: "data",
    default: "`18`",
    description: "lifecycle events older than this many calendar months are hidden and pruned",
  },
  {
    name: "RETENTION_PRUNE_INTERVAL",
    group: "data",
    default: "`1h`",
    description:
      "how often the server prunes (lifecycle events, succeeded webhook deliveries, idempotency records past their 24 h window); `0` disables (use `reftrail prune`)",
  },
  {
    name: "VACUUM_CHECK_INTERVAL",
    group: "data",
    default: "`10s` (off when `NODE_ENV=test`)",
    description:
      "PostgreSQL: how often each instance looks for its tables that autovacuum leaves alone (the server's `autovacuum = off`, or a table's `autovacuum_enabled = false`) and vacuums those past 1,000 dead rows and 5 % of their live rows, analyzes those past 50 changed rows and 10 % (autovacuum's own threshold); nothing where autovacuum is on; `0`/`off` disables",
  },
  {
    name: "WEBHOOK_SECRET_KEY",
    group: "webhooks",
    default:
      "required in production; elsewhere a key file beside the SQLite file (`data/webhook-secret.key` for PostgreSQL), created with mode 0600",
    description:
      "32 bytes (base64 or 64 hex digits) that encrypt webhook signing secrets at rest; make one with `openssl rand -base64 32`, set the same value on every instance, never change it (stored secrets could not be read)",
  },
  {
    name: "WEBHOOK_ALLOWED_CIDRS",
    group: "webhooks",
    default: "`127.0.0.0/8,::1/128` (empty in production)",
    description:
      "comma-separated `ADDRESS[/BITS][:PORT]` entries HTTP webhooks may target although they are private, loopback or link-local (everything else non-public is refused, also after DNS resolution); an entry with a port allows that port only (IPv6 with a port in brackets: `[fd00::/8]:8443`)",
  },
  {
    name: "WEBHOOK_BROKER_ALLOWED_CIDRS",
    group: "webhooks",
    default: "`127.0.0.0/8,::1/128` (empty in production)",
    description:
      "the same for RabbitMQ and NATS destinations, so that allowing an internal broker (`10.0.0.5:5672`) opens neither that range to HTTP webhooks nor the broker's other ports",
  },
  {
    name: "WEBHOOK_RETRY_SCHEDULE",
    group: "webhooks",
    default: "`0s,5s,5m,30m,2h,5h,10h,10h`",
    description:
      "webhook delays: the first before the first attempt, each next one after a failed attempt (\u00b120% jitter); one attempt per entry",
  },
  {
    name: "WEBHOOK_TIMEOUT",
    group: "webhooks",
    default: "`15s`",
    description:
      "webhook request timeout (connection, answer and body; for a broker destination, connection and confirm)",
  },
  {
    name: "WEBHOOK_BROKER_CA_FILE",
    group: "webhooks",
    default: "none: Node's own authorities",
    description:
      "a PEM file of certificate authorities trusted, besides Node's own, to sign a broker's TLS certificate (`amqps://`, NATS `tls://`): for brokers under a private authority; read at start",
  },
  {
    name: "WEBHOOK_DISABLE_AFTER",
    group: "webhooks",
    default: "`5d`",
    description: "an endpoint whose attempts all fail for this long is disabled, with the reason recorded",
  },
  {
    name: "WEBHOOK_DELIVERY_RETENTION",
    group: "webhooks",
    default: "`30d`",
    description:
      "succeeded webhook deliveries and their attempts are deleted this long after they succeeded (by the retention job and `reftrail prune`)",
  },
  {
    name: "WEBHOOK_LEASE",
    group: "webhooks",
    default: "`30s`",
    description:
      "how long a claimed delivery is reserved for one instance; a dead instance's deliveries are taken over after it (must exceed `WEBHOOK_TIMEOUT` by 1 s)",
  },
  {
    name: "WEBHOOK_CONCURRENCY",
    group: "webhooks",
    default: "`50`",
    description: "webhook requests in flight per instance",
  },
  {
    name: "WEBHOOK_CONCURRENCY_PER_ENDPOINT",
    group: "webhooks",
    default: "`10`",
    description: "webhook requests in flight per instance to one endpoint (a slow endpoint holds at most this many)",
  },
  {
    name: "WEBHOOK_CONCURRENCY_PER_ORGANIZATION",
    group: "webhooks",
    default: "half of `WEBHOOK_CONCURRENCY`, at least twice `WEBHOOK_CONCURRENCY_PER_ENDPOINT` (`25` by default)",
    description:
      "webhook requests in flight per instance for one organization: one tenant's silent or slow receivers hold at most this many, and the others' next deliveries find a free slot",
  },
  {
    name: "WEBHOOK_REPLAY_BATCH_SIZE",
    group: "webhooks",
    default: "`1000`",
    description:
      "events a webhook replay reads and schedules per batch (each batch once most of the previous one has gone out)",
  },
  {
    name: "WEBHOOK_POLL_INTERVAL",
    group: "webhooks",
    default: "`500ms`",
    description:
      "how often the worker looks for due deliveries when no commit wakes it (retries, other instances' events)",
  },
  {
    name: "WEBHOOK_WORKER",
    group: "webhooks",
    default: "`on`",
    description: "`off` runs an instance that serves the API but sends no webhooks",
  },
  {
    name: "SUBSCRIPTION_POLL_INTERVAL",
    group: "live",
    default: "`1s`",
    description:
      "how often subscriptions read the log when no commit signal arrives (the longest a lost signal delays an event)",
  },
  {
    name: "SUBSCRIPTION_MAX_QUEUED_EVENTS",
    group: "live",
    default: "`1000`",
    description: "events one subscription holds for a slow client before it falls back to reading the log",
  },
  {
    name: "SUBSCRIPTION_AUTH_RECHECK_INTERVAL",
    group: "live",
    default: "`5s`",
    description: "how often the keys of open WebSocket connections are checked for revocation",
  },
  {
    name: "SUBSCRIPTION_MAX_OPERATIONS_PER_CONNECTION",
    group: "live",
    default: "`100`",
    description: "operations one graphql-ws connection may run at once",
  },
  {
    name: "SUBSCRIPTION_MAX_STREAMS_PER_ORGANIZATION",
    group: "live",
    default: "`100`",
    description:
      "Server-Sent Events streams (`/graphql/stream`) one organization may hold open at once on one instance",
  },
  {
    name: "FEED_MAX_WAITING_POLLS_PER_ORGANIZATION",
    group: "live",
    default: "`1000`",
    description:
      "long polls of `GET /v1/events` (`wait=`) one organization may have waiting at once on one instance; one more is 429 `TOO_MANY_WAITING_POLLS` with `Retry-After: 1` (a poll without `wait` is never refused)",
  },
  {
    name: "READ_CACHE_MAX_BYTES",
    group: "reads",
    default: "`67108864` (64 MiB)",
    description:
      "bytes of read responses each instance keeps (REST GET pages and GraphQL queries of tags, references and their log; exact, keyed by the organization's data version: [decision 0012](decisions/0012-read-cache.md)); `0` turns it off. A request with `Cache-Control: no-cache` is computed afresh",
  },
  {
    name: "SQLITE_READ_THREAD",
    group: "reads",
    default: "`on`",
    description:
      "SQLite: `off` reads pages of references on the event loop's thread instead of a thread of their own beside it ([decision 0004](decisions/0004-pages-as-stored-json.md)); no effect on PostgreSQL",
  },
  {
    name: "READS_PER_TURN",
    group: "reads",
    default: "`64`",
    description:
      "API reads (REST GET, GraphQL queries) an instance starts per event-loop turn, at most (one, after a turn that accepted a connection); the others wait in arrival order, while writes, new connections and database answers are served between them. How many a turn starts below this adapts to `READ_TURN_TARGET` ([decision 0029](decisions/0029-read-admission.md))",
  },
  {
    name: "READ_TURN_TARGET",
    group: "reads",
    default: "`10ms` on SQLite, `7ms` on PostgreSQL",
    description:
      "how long an event-loop turn that serves waiting reads aims to last: one read more per turn after a shorter turn, half as many after a longer one, never fewer than 4. Shorter keeps a write's wait shorter under a read flood, longer serves more reads; `0ms` starts `READS_PER_TURN` every turn On PostgreSQL a write waits for a turn at each of its three round trips (on SQLite it runs within one), hence its shorter default",
  },
  {
    name: "MAX_READS_IN_FLIGHT",
    group: "reads",
    default: "`64`",
    description:
      "API reads an instance runs at once (a PostgreSQL read waiting for its answers counts): a bound on memory under a flood of reads, set well above what keeps the database busy, since a PostgreSQL read spends most of its time waiting",
  },
  {
    name: "OTEL_EXPORTER_OTLP_ENDPOINT",
    group: "traces",
    default: "none: traces off",
    description:
      "turns OpenTelemetry traces on: spans are exported over OTLP/HTTP (JSON bodies) to `<endpoint>/v1/traces`, e.g. `http://collector:4318` ([Traces](operating.md#traces)). With no tracing setting the SDK is not even loaded",
  },
  {
    name: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    group: "traces",
    default: "none",
    description: "the same, as the full URL spans are posted to (wins over `OTEL_EXPORTER_OTLP_ENDPOINT`)",
  },
  {
    name: "OTEL_TRACES_EXPORTER",
    group: "traces",
    default: "`otlp` when an endpoint is set, else `none`",
    description: "`otlp`; `console` (spans printed on stdout, to look at them without a collector); `none` (off)",
  },
  {
    name: "OTEL_SERVICE_NAME",
    group: "traces",
    default: "`reftrail`",
    description: "the spans' `service.name`",
  },
  {
    name: "OTEL_SDK_DISABLED",
    group: "traces",
    default: "`false`",
    description: "`true` turns traces off whatever else is set",
  },
];

/** Variables the test suite reads (never the server): docs/settings.md lists them after the server's. */
export const TEST_SETTINGS: readonly Omit<SettingDescription, "group">[] = [
  {
    name: "TEST_DATABASE_URL",
    default: "`postgresql://postgres@127.0.0.1:5432/postgres`",
    description:
      "the PostgreSQL server the tests use: they create and drop their own `reftrail_test_<random>` databases there. Under `CI=true` a test that needs it fails when it is unreachable",
  },
  {
    name: "TEST_RABBITMQ_URL",
    default: "`amqp://guest:guest@127.0.0.1:5672/`",
    description: "the RabbitMQ broker of the broker-destination tests",
  },
  {
    name: "TEST_NATS_URL",
    default: "`nats://127.0.0.1:4222`",
    description: "the NATS server, with JetStream, of the broker-destination tests",
  },
  {
    name: "CHROMIUM_PATH",
    default: "the Chromium of the `@sparticuz/chromium` dev dependency (Linux x64 and arm64)",
    description:
      "the Chromium executable the browser tests (explorer, operator page) drive, where the dev dependency carries none",
  },
  {
    name: "CI",
    default: "unset",
    description:
      "`true` makes a test whose service (PostgreSQL, RabbitMQ, NATS) is missing fail with a line naming it rather than skip",
  },
];
