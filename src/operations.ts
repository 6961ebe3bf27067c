import type { FastifyInstance } from "fastify";
import { collectDefaultMetrics, Histogram, Registry } from "prom-client";
import type { Config } from "./config.ts";
import type { Database } from "./store/database.ts";
import { listMigrations } from "./store/migrations.ts";

export interface OperationsDependencies {
  readonly database: Database;
  readonly config: Config;
}

/**
 * SPEC §1 operations endpoints, without authentication: `/healthz` (the process answers), `/readyz` (the
 * database answers and every migration is applied), `/metrics` (Prometheus text).
 */
export async function registerOperations(
  app: FastifyInstance,
  { database }: OperationsDependencies,
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

  const expected = listMigrations(database.provider).map((migration) => migration.name);
  app.get("/healthz", { schema: { hide: true } }, async () => ({ status: "ok" }));
  app.get("/readyz", { schema: { hide: true } }, async (request, reply) => {
    try {
      const rows = await database.prisma.$queryRawUnsafe<{ name: string }[]>(`SELECT name FROM "_reftrail_migrations"`);
      const applied = new Set(rows.map((row) => row.name));
      const pending = expected.filter((name) => !applied.has(name));
      if (pending.length > 0) return reply.code(503).send({ status: "migrations_pending", pending });
      return { status: "ready", database: database.provider };
    } catch (error) {
      request.log.warn({ err: error }, "readiness check failed");
      return reply.code(503).send({ status: "database_unavailable" });
    }
  });
  app.get("/metrics", { schema: { hide: true } }, async (_request, reply) =>
    reply.type(registry.contentType).send(await registry.metrics()),
  );
  return registry;
}
