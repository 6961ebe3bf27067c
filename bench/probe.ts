/*
 * `node --import tsx bench/probe.ts`: one server in this process, loaded from the load worker, to see *why* a row
 * is slow rather than how slow. Per row: req/s and percentiles, the server's event-loop delay
 * (`monitorEventLoopDelay`), per-connection request counts and latencies (unfair service shows there), each
 * server socket's accept time, first request and requests served, and with PROBE_PROFILE=<path prefix> a CPU
 * profile of the measured run (`<prefix>-<row>.cpuprofile`, for Chrome DevTools). Used to find the tails
 * (docs/decisions.md, "Tails").
 *
 * Settings: PROBE_KIND sqlite|postgres, PROBE_ROWS (fhello, ahello, ref, two, all, one, events, and
 * twofresh, reffresh: two and ref with `Cache-Control: no-cache`), PROBE_SECONDS 5,
 * PROBE_CONNECTIONS 50, PROBE_REFERENCES 20000, PROBE_EVENTS 100000, PROBE_PROFILE.
 */
import "./production-env.ts";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { loadavg } from "node:os";
import { startBaseline, HELLO_QUERY } from "./baseline.ts";
import { LoadGenerator, type LoadResult, type LoadSpec } from "./load.ts";
import { seedEventLog, seedReferences, type Kind } from "./seed.ts";
import { createTestDatabase } from "../test/support/test-server.ts";
import { startBenchApp } from "./bench-app.ts";

const kind = (process.env.PROBE_KIND ?? "sqlite") as Kind;
const rowsWanted = new Set((process.env.PROBE_ROWS ?? "fhello,ahello,ref,two,one").split(","));
const seconds = Number(process.env.PROBE_SECONDS ?? 5);
const connections = Number(process.env.PROBE_CONNECTIONS ?? 50);

const REF_QUERY = `query BenchReference($id: ID!) {
  reference(id: $id) {
    id tags { id name }
    events(first: 50) { edges { cursor node { id type occurredAt } } pageInfo { hasNextPage endCursor } }
  }
}`;

async function main() {
  const database = await createTestDatabase(kind, "reftrail_probe");
  const start = () => startBenchApp(database.url);
  let app = await start();
  const { organization, apiKey } = await app.services.organizations.createOrganization("probe");
  await app.close();
  await seedReferences({
    kind,
    url: database.url,
    organizationId: organization.id,
    tags: 1000,
    references: Number(process.env.PROBE_REFERENCES ?? 20000),
    createdEvents: true,
    sqliteAnalyze: false,
    newestAt: Date.now() - 3_600_000,
  });
  const eventLog = await seedEventLog({
    kind,
    url: database.url,
    organizationId: organization.id,
    events: Number(process.env.PROBE_EVENTS ?? 100000),
    sqliteAnalyze: false,
    firstAt: Date.now() - 7_200_000 - 100000,
    tags: [],
  });
  app = await start();
  await app.http.listen({ host: "127.0.0.1", port: 0 });
  const address = app.http.server.address() as { port: number };
  const base = `http://127.0.0.1:${address.port}`;
  const baseline = await startBaseline();
  const load = new LoadGenerator();
  const headers = { "X-API-Key": apiKey.key, "Content-Type": "application/json" };
  const specs: Record<string, Omit<LoadSpec, "connections">> = {
    fhello: { url: `${baseline.url}/hello` },
    ahello: {
      url: `${baseline.url}/graphql`,
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: HELLO_QUERY,
    },
    ref: {
      url: `${base}/graphql`,
      method: "POST",
      headers,
      body: JSON.stringify({ query: REF_QUERY, variables: { id: eventLog.referenceId } }),
    },
    two: { url: `${base}/v1/references?tag_names=tag-0500&tag_names=tag-0501&tag_match=any&limit=50`, headers },
    all: { url: `${base}/v1/references?tag_names=tag-0500&tag_names=tag-0501&tag_match=all&limit=50`, headers },
    one: { url: `${base}/v1/references?tag_names=tag-0500`, headers },
    // Computed every time (the read cache bypassed): the data path.
    twofresh: {
      url: `${base}/v1/references?tag_names=tag-0500&tag_names=tag-0501&tag_match=any&limit=50`,
      headers: { ...headers, "Cache-Control": "no-cache" },
    },
    reffresh: {
      url: `${base}/graphql`,
      method: "POST",
      headers: { ...headers, "Cache-Control": "no-cache" },
      body: JSON.stringify({ query: REF_QUERY, variables: { id: eventLog.referenceId } }),
    },
    events: { url: `${base}/v1/references/${eventLog.referenceId}/events?limit=50`, headers },
  };
  for (const [name, spec] of Object.entries(specs)) {
    if (!rowsWanted.has(name)) continue;
    const sockets = new Map<object, { accepted: number; first?: number; served: number }>();
    const t0 = performance.now();
    const onConnection = (socket: object) => sockets.set(socket, { accepted: performance.now() - t0, served: 0 });
    const onRequest = (request: { socket: object }, reply: { on(e: string, f: () => void): void }) => {
      const own = sockets.get(request.socket);
      if (!own) return;
      own.first ??= performance.now() - t0;
      reply.on("finish", () => (own.served += 1));
    };
    const server = name.endsWith("hello") ? null : app.http.server;
    server?.on("connection", onConnection);
    server?.on("request", onRequest as never);
    const { Session } = await import("node:inspector/promises");
    const session = process.env.PROBE_PROFILE ? new Session() : null;
    if (session) {
      session.connect();
      await session.post("Profiler.enable");
      await session.post("Profiler.start");
    }
    const delay = monitorEventLoopDelay({ resolution: 5 });
    delay.enable();
    const gcBefore = process.memoryUsage();
    const result: LoadResult = await load.run({
      ...spec,
      connections,
      durationSeconds: seconds,
      warmupSeconds: 1,
      perConnection: true,
    });
    delay.disable();
    if (session) {
      const { profile } = await session.post("Profiler.stop");
      (await import("node:fs")).writeFileSync(
        `${process.env.PROBE_PROFILE}-${name}.cpuprofile`,
        JSON.stringify(profile),
      );
      session.disconnect();
    }
    server?.off("connection", onConnection);
    server?.off("request", onRequest as never);
    if (server) {
      const seen = [...sockets.values()].sort((a, b) => a.accepted - b.accepted);
      console.log(
        `   server sockets ${seen.length}: accepted at ${seen.map((s) => s.accepted.toFixed(0)).join(" ")}\n   first request at ${seen.map((s) => s.first?.toFixed(0) ?? "-").join(" ")}\n   served ${seen.map((s) => s.served).join(" ")}`,
      );
    }
    const per = [...(result.perConnection ?? [])].sort((a, b) => a.requests - b.requests);
    const ms = (n: number) => (n / 1e6).toFixed(1);
    console.log(
      `${kind} ${name}: load ${loadavg()[0]!.toFixed(2)} ${result.rps.toFixed(0)} req/s p50 ${result.p50.toFixed(1)} p90 ${result.p90.toFixed(1)} p99 ${result.p99.toFixed(1)} max ${result.max.toFixed(0)} (p99/p50 ${(result.p99 / result.p50).toFixed(1)}) ramp ${result.rampSeconds?.toFixed(2)} s`,
    );
    console.log(
      `   loop delay p50 ${ms(delay.percentile(50))} p99 ${ms(delay.percentile(99))} max ${ms(delay.max)} ms; heap ${(gcBefore.heapUsed / 1e6).toFixed(0)}MB`,
    );
    console.log(
      `   per connection requests min ${per[0]?.requests} median ${per[per.length >> 1]?.requests} max ${per.at(-1)?.requests}; ` +
        `conn p99 min ${Math.min(...per.map((c) => c.p99)).toFixed(0)} max ${Math.max(...per.map((c) => c.p99)).toFixed(0)}; conn max latency ${per.map((c) => c.max.toFixed(0)).join(" ")}`,
    );
  }
  await load.close();
  await baseline.close();
  await app.close();
  await database.drop();
}

await main();
