import { createHash, timingSafeEqual } from "node:crypto";
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Config } from "./config.ts";
import type { Store } from "./domain/store.ts";

/** One cache of prepared statements, as the executor counts it. */
export interface StatementCacheReading {
  readonly cache: string;
  readonly size: number;
  readonly max: number;
  readonly evictions: number;
}

/** What the operations endpoints read, handed in by the composition root (app.ts): they never touch the store. */
export interface OperationsDependencies {
  readonly config: Config;
  /** The database's name in `/readyz` (`sqlite`, `postgres`). */
  readonly databaseProvider: string;
  /** The migrations not applied yet; throws when the database does not answer. */
  readonly findPendingMigrations: () => Promise<readonly string[]>;
  /** The executor's caches of prepared statements now. */
  readonly statementCaches: () => readonly StatementCacheReading[];
}

/**
 * The operations endpoints, without an API key: `/healthz` (the process answers), `/readyz` (the database
 * answers and every migration is applied), `/metrics` (Prometheus text). `/metrics` tells request rates, routes
 * and queue depths, so it is guarded on its own terms: `METRICS_TOKEN` (a bearer token) and/or `METRICS_PORT` (a
 * port of its own, which a deployment keeps off the public network); a production server with neither does not
 * serve it.
 */
export async function registerOperations(
  app: FastifyInstance,
  { config, databaseProvider, findPendingMigrations, statementCaches }: OperationsDependencies,
): Promise<Registry> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const requestDuration = new Histogram({
    name: "reftrail_http_request_duration_seconds",
    help: "HTTP request duration by method, route and status",
    labelNames: ["method", "route", "status"] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  app.addHook("onResponse", async (request, reply) => {
    requestDuration.observe(
      { method: request.method, route: request.routeOptions.url ?? "unmatched", status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  });

  registerStatementCacheMetrics(registry, statementCaches);

  app.get("/healthz", { schema: { hide: true } }, async () => ({ status: "ok" }));
  app.get("/readyz", { schema: { hide: true } }, async (request, reply) => {
    try {
      const pending = await findPendingMigrations();
      if (pending.length > 0) return reply.code(503).send({ status: "migrations_pending", pending });
      return { status: "ready", database: databaseProvider };
    } catch (error) {
      request.log.warn({ err: error }, "readiness check failed");
      return reply.code(503).send({ status: "database_unavailable" });
    }
  });
  const serveMetrics = async (request: FastifyRequest, reply: FastifyReply) => {
    if (config.metricsToken !== null && !presentsToken(request, config.metricsToken)) {
      return reply
        .code(401)
        .header("www-authenticate", 'Bearer realm="metrics"')
        .type("application/problem+json")
        .send({
          type: "about:blank",
          title: "Unauthorized",
          status: 401,
          code: "UNAUTHENTICATED",
          detail: "/metrics requires Authorization: Bearer <METRICS_TOKEN>",
        });
    }
    return reply.type(registry.contentType).send(await registry.metrics());
  };

  if (config.metricsPort !== null) {
    const metricsServer = Fastify({ logger: false });
    metricsServer.get("/metrics", serveMetrics);
    const address = await metricsServer.listen({ host: config.host, port: config.metricsPort });
    app.log.info({ address }, `metrics listening at ${address}/metrics`);
    app.addHook("onClose", async () => metricsServer.close());
  } else if (config.metricsToken !== null || !config.isProduction) {
    app.get("/metrics", { schema: { hide: true } }, serveMetrics);
  } else {
    app.log.warn("/metrics is not served: set METRICS_TOKEN (a bearer token) or METRICS_PORT (a port of its own)");
  }
  return registry;
}

/**
 * The executor's caches of prepared statements (src/store/sql/statement-cache.ts): how many they hold, their
 * bound, and how many they dropped to stay within it. Evictions that keep rising tell that the store's statements
 * no longer fit the bound.
 */
function registerStatementCacheMetrics(
  registry: Registry,
  statementCaches: () => readonly StatementCacheReading[],
): void {
  new Gauge({
    name: "reftrail_statement_cache_size",
    help: "Prepared statements kept, by cache (PostgreSQL: summed over the open connections)",
    labelNames: ["cache"] as const,
    registers: [registry],
    collect() {
      for (const cache of statementCaches()) this.set({ cache: cache.cache }, cache.size);
    },
  });
  new Gauge({
    name: "reftrail_statement_cache_max",
    help: "The most prepared statements a cache keeps per connection",
    labelNames: ["cache"] as const,
    registers: [registry],
    collect() {
      for (const cache of statementCaches()) this.set({ cache: cache.cache }, cache.max);
    },
  });
  const counted = new Map<string, number>();
  new Counter({
    name: "reftrail_statement_cache_evictions_total",
    help: "Prepared statements dropped, least recently used first, to keep a cache within its bound",
    labelNames: ["cache"] as const,
    registers: [registry],
    collect() {
      for (const cache of statementCaches()) {
        // The executor counts; the counter follows it.
        this.inc({ cache: cache.cache }, cache.evictions - (counted.get(cache.cache) ?? 0));
        counted.set(cache.cache, cache.evictions);
      }
    },
  });
}

/** Whether the request carries `Authorization: Bearer <token>`, compared in constant time. */
function presentsToken(request: FastifyRequest, token: string): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? "");
  if (!match) return false;
  const digest = (text: string) => createHash("sha256").update(text).digest();
  return timingSafeEqual(digest(match[1]!), digest(token));
}

/**
 * `reftrail_contended_units_total{outcome}`: units of work the database aborted in favour of a concurrent one (a
 * deadlock, a serialization failure), run again (`retried`) or given up and answered 503 (`gave_up`). Returns a
 * function that stops the counting.
 */
export function countContendedUnits(registry: Registry, units: Pick<Store, "onContendedUnit">): () => void {
  const contended = new Counter({
    name: "reftrail_contended_units_total",
    help: "Units of work aborted by the database for a deadlock or a serialization failure, by what followed",
    labelNames: ["outcome"] as const,
    registers: [registry],
  });
  return units.onContendedUnit((outcome) => contended.inc({ outcome }));
}
