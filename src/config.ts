/**
 * The only reader of `process.env`. Every setting has a working default so that `npm start` runs with no
 * configuration; the README's configuration table lists the same names and defaults.
 */
export interface Config {
  readonly port: number;
  readonly host: string;
  readonly databaseUrl: string;
  readonly nodeEnv: string;
  readonly isProduction: boolean;
  readonly logLevel: string;
  /** Requests per minute per API key; `null` turns rate limiting off. */
  readonly rateLimitPerMinute: number | null;
  readonly bodyLimitBytes: number;
  readonly maxTagsPerReference: number;
  readonly maxTagsPerOrganization: number;
  readonly extractionFailureThreshold: number;
  readonly graphqlMaxDepth: number;
  readonly graphqlMaxCost: number;
  /** Key for the HMAC that makes page cursors tamper-evident. */
  readonly cursorSecret: string;
  readonly retentionMonths: number;
  /** How often the server deletes events past retention; 0 turns the job off (use `reftrail prune`). */
  readonly retentionPruneIntervalMs: number;
  readonly webhookAllowedCidrs: readonly string[];
  readonly webhookRetryScheduleMs: readonly number[];
  readonly webhookTimeoutMs: number;
}

export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

const DURATION_UNITS_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Parses `250ms`, `5s`, `5m`, `2h`, `1d`. */
export function parseDuration(text: string, name: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(text);
  if (!match) throw new ConfigError(`${name}: "${text}" is not a duration such as 500ms, 5s, 5m, 2h or 1d`);
  return Math.round(Number(match[1]) * DURATION_UNITS_MS[match[2]!]!);
}

function parseInteger(env: NodeJS.ProcessEnv, name: string, fallback: number, min = 0): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new ConfigError(`${name}: "${raw}" is not an integer >= ${min}`);
  return value;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
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
  const cidrs = env.WEBHOOK_ALLOWED_CIDRS ?? (isProduction ? "" : "127.0.0.0/8,::1/128");
  const schedule = env.WEBHOOK_RETRY_SCHEDULE ?? "0s,5s,5m,30m,2h,5h,10h,10h";
  // Cursors only ever address the caller's own data, so the default key leaks nothing; it only lets a
  // client forge a cursor it could have paged to anyway. Deployments may still set their own.
  const cursorSecret = env.CURSOR_SECRET ?? "reftrail-default-cursor-secret";
  return {
    port: parseInteger(env, "PORT", 4000),
    host: env.HOST ?? "0.0.0.0",
    databaseUrl: env.DATABASE_URL ?? "file:./data/reftrail.db",
    nodeEnv,
    isProduction,
    logLevel: env.LOG_LEVEL ?? (nodeEnv === "test" ? "warn" : "info"),
    rateLimitPerMinute,
    bodyLimitBytes: parseInteger(env, "BODY_LIMIT_BYTES", 1_048_576, 1),
    maxTagsPerReference: parseInteger(env, "MAX_TAGS_PER_REFERENCE", 50, 1),
    maxTagsPerOrganization: parseInteger(env, "MAX_TAGS_PER_ORGANIZATION", 10_000, 1),
    extractionFailureThreshold: parseInteger(env, "EXTRACTION_FAILURE_THRESHOLD", 10, 1),
    graphqlMaxDepth: parseInteger(env, "GRAPHQL_MAX_DEPTH", 12, 1),
    graphqlMaxCost: parseInteger(env, "GRAPHQL_MAX_COST", 50_000, 1),
    cursorSecret,
    retentionMonths: parseInteger(env, "RETENTION_MONTHS", 18, 1),
    retentionPruneIntervalMs:
      env.RETENTION_PRUNE_INTERVAL === "0" ? 0 : parseDuration(env.RETENTION_PRUNE_INTERVAL ?? "1h", "RETENTION_PRUNE_INTERVAL"),
    webhookAllowedCidrs: cidrs
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
    webhookRetryScheduleMs: schedule.split(",").map((part) => parseDuration(part, "WEBHOOK_RETRY_SCHEDULE")),
    webhookTimeoutMs: parseDuration(env.WEBHOOK_TIMEOUT ?? "15s", "WEBHOOK_TIMEOUT"),
  };
}
