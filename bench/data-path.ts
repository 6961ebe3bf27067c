/*
 * `node --import tsx bench/data-path.ts`: the uncached data path against its anchors, in one run. References each
 * carry 2 of 50 tags and hold 20 lifecycle events; every request asks for a random reference (GraphQL) or a random
 * pair of tags (REST, `tag_match=any`), with `Cache-Control: no-cache`. Rows: Fastify hello, Apollo hello, the
 * GraphQL reference, the REST two-tag page; each row's ratio is to its anchor of the same run.
 *
 * Settings: DATA_PATH_KIND sqlite|postgres, DATA_PATH_REFERENCES 2000, DATA_PATH_SECONDS 8,
 * DATA_PATH_CONNECTIONS 50, DATA_PATH_ROUNDS 1 (rounds alternate anchor and row), DATA_PATH_ROWS (some of
 * fhello,ahello,reference,page; all by default).
 *
 * DATA_PATH_MODE=inject measures this process's CPU time per request instead: each request injected into the
 * server in-process (Fastify's `inject`, no sockets), one at a time, anchors and rows interleaved,
 * DATA_PATH_REQUESTS 2000 each; on a loaded machine CPU time stays comparable where req/s do not. (PostgreSQL's
 * own work runs in its processes and is not counted.)
 *
 * DATA_PATH_PROFILE=<path prefix> writes a CPU profile of each measured reftrail row
 * (`<prefix>-<database>-<row>.cpuprofile`, for Chrome DevTools): the server runs in this process.
 *
 * DATA_PATH_MODE=seed only seeds, keeps the database and prints its URL, the organization, an API key and a
 * reference id, for measuring one request shape by hand.
 */
import "./production-env.ts";
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import Sqlite from "better-sqlite3";
import pg from "pg";
import { v7 } from "uuid";
import { ApolloServer } from "@apollo/server";
import { fastifyApolloHandler } from "@as-integrations/fastify";
import Fastify from "fastify";
import { startBaseline, HELLO_QUERY } from "./baseline.ts";
import { LoadGenerator, type LoadSpec } from "./load.ts";
import { dbTime, prng, tagListBackfill, type Kind } from "./seed.ts";
import { createTestDatabase } from "../test/support/test-server.ts";
import { sqliteFilePath } from "../src/store/database.ts";
import { tagNameKey } from "../src/domain/tags/tag-name.ts";
import { startBenchApp } from "./bench-app.ts";

const kind = (process.env.DATA_PATH_KIND ?? "sqlite") as Kind;
const referenceCount = Number(process.env.DATA_PATH_REFERENCES ?? 2000);
const seconds = Number(process.env.DATA_PATH_SECONDS ?? 8);
const connections = Number(process.env.DATA_PATH_CONNECTIONS ?? 50);
const rounds = Number(process.env.DATA_PATH_ROUNDS ?? 1);
const rowsWanted = process.env.DATA_PATH_ROWS ? new Set(process.env.DATA_PATH_ROWS.split(",")) : null;
const TAGS = 50;
const EVENTS_PER_REFERENCE = 20;

const REFERENCE_QUERY = `query DataPathReference($id: ID!) {
  reference(id: $id) {
    tags { id name }
    events(first: 20) { edges { cursor node { id type occurredAt detail } } pageInfo { hasNextPage endCursor } }
  }
}`;

interface Seeded {
  readonly referenceIds: string[];
  readonly tagNames: string[];
}

/** Rows of every table the page reads, written straight to the database (the app's triggers still run). */
async function seed(url: string, organizationId: string): Promise<Seeded> {
  const random = prng(20261124);
  const now = Date.now() - 3_600_000;
  const first = now - 30 * 86_400_000;
  const tags = Array.from({ length: TAGS }, (_, i) => {
    const name = `tag-${String(i).padStart(2, "0")}`;
    return { id: v7({ msecs: first - 100_000 + i }), name, key: tagNameKey(name) };
  });
  const referenceIds: string[] = [];
  const references: unknown[][] = [];
  const links: unknown[][] = [];
  const events: unknown[][] = [];
  const step = (now - first) / referenceCount;
  for (let i = 0; i < referenceCount; i++) {
    const at = Math.round(first + i * step);
    const id = v7({ msecs: at });
    referenceIds.push(id);
    references.push([id, organizationId, `DPTU${String(i).padStart(7, "0")}`, "MAEU", dbTime(kind, at)]);
    const a = Math.floor(random() * TAGS);
    let b = Math.floor(random() * (TAGS - 1));
    if (b >= a) b += 1;
    for (const t of [a, b]) links.push([id, tags[t]!.id, dbTime(kind, at)]);
    const snapshot = JSON.stringify(
      [a, b].sort((x, y) => x - y).map((t) => ({ id: tags[t]!.id, name: tags[t]!.name })),
    );
    for (let e = 0; e < EVENTS_PER_REFERENCE; e++) {
      const eventAt = at + e * 1000;
      events.push([
        v7({ msecs: eventAt }),
        organizationId,
        id,
        e === 0 ? "reference_created" : "extraction_succeeded",
        dbTime(kind, eventAt),
        JSON.stringify({ reference_id: id, organization_id: organizationId, status: "succeeded" }),
        snapshot,
      ]);
    }
  }
  const referenceColumns = ["id", "organization_id", "container_id", "carrier_code", "created_at"];
  const statements: [string, string[], unknown[][]][] = [
    [
      "tags",
      ["id", "organization_id", "name", "name_key", "created_at", "updated_at"],
      tags.map((t) => [t.id, organizationId, t.name, t.key, dbTime(kind, first), dbTime(kind, first)]),
    ],
    ["shipping_references", referenceColumns, references],
    ["reference_tags", ["reference_id", "tag_id", "created_at"], links],
    [
      "lifecycle_events",
      ["id", "organization_id", "reference_id", "type", "occurred_at", "detail", "reference_tags"],
      events,
    ],
  ];
  if (kind === "sqlite") {
    const db = new Sqlite(sqliteFilePath(url));
    db.pragma("synchronous = OFF");
    db.transaction(() => {
      for (const [table, columns, rows] of statements) {
        const insert = db.prepare(
          `INSERT INTO "${table}" (${columns.map((c) => `"${c}"`).join(", ")}${table === "shipping_references" ? ', "updated_at", "active", "auto_unsubscribed", "consecutive_failures"' : ""}) VALUES (${columns.map(() => "?").join(", ")}${table === "shipping_references" ? ", ?, 1, 0, 0" : ""})`,
        );
        for (const row of rows) insert.run(...row, ...(table === "shipping_references" ? [row[4]] : []));
      }
      void backfillTagLists(db, null);
    })();
    db.pragma("wal_checkpoint(TRUNCATE)");
    db.close();
  } else {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query("BEGIN");
    for (const [table, columns, rows] of statements) {
      const extra = table === "shipping_references";
      for (let start = 0; start < rows.length; start += 1000) {
        const chunk = rows.slice(start, start + 1000);
        const values: unknown[] = [];
        const tuples = chunk.map((row) => {
          const first = values.length;
          values.push(...row);
          const own = row.map((_, i) => `$${first + i + 1}`);
          if (extra) own.push(`$${first + 5}`, "TRUE", "FALSE", "0");
          return `(${own.join(", ")})`;
        });
        const extraColumns = extra ? ', "updated_at", "active", "auto_unsubscribed", "consecutive_failures"' : "";
        await client.query(
          `INSERT INTO "${table}" (${columns.map((c) => `"${c}"`).join(", ")}${extraColumns}) VALUES ${tuples.join(", ")}`,
          values,
        );
      }
    }
    await backfillTagLists(null, client);
    await client.query("COMMIT");
    await client.query("VACUUM (ANALYZE)");
    await client.end();
  }
  return { referenceIds, tagNames: tags.map((t) => t.name) };
}

/** Fills the references' tag lists as migration 0009 does (absent before that migration). */
function backfillTagLists(sqlite: Sqlite.Database | null, postgres: pg.Client | null): Promise<unknown> | void {
  let sql: string;
  try {
    sql = tagListBackfill(kind);
  } catch {
    return;
  }
  if (sqlite) sqlite.exec(sql);
  else return postgres!.query(sql);
}

/** Mean microseconds per request, each kind of request injected in turn (see DATA_PATH_MODE=inject). */
async function measureInjected(
  app: Awaited<ReturnType<typeof startBenchApp>>,
  key: string,
  referenceIds: readonly string[],
  tagNames: readonly string[],
): Promise<void> {
  const anchor = Fastify({ logger: false });
  const apollo = new ApolloServer({
    typeDefs: "type Query { hello: String }",
    resolvers: { Query: { hello: () => "world" } },
  });
  await apollo.start();
  anchor.route({ method: ["GET", "POST"], url: "/graphql", handler: fastifyApolloHandler(apollo) });
  anchor.get("/hello", async () => ({ hello: "world" }));
  await anchor.ready();
  await app.http.ready();
  const headers = { "x-api-key": key, "content-type": "application/json", "cache-control": "no-cache" };
  const random = prng(11);
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
  const kinds: Record<string, () => Promise<{ statusCode: number }>> = {
    fhello: () => anchor.inject({ method: "GET", url: "/hello" }),
    ahello: () =>
      anchor.inject({
        method: "POST",
        url: "/graphql",
        headers: { "content-type": "application/json" },
        payload: HELLO_QUERY,
      }),
    reference: () =>
      app.http.inject({
        method: "POST",
        url: "/graphql",
        headers,
        payload: JSON.stringify({ query: REFERENCE_QUERY, variables: { id: pick(referenceIds) } }),
      }),
    page: () => {
      const a = pick(tagNames);
      let b = pick(tagNames);
      while (b === a) b = pick(tagNames);
      return app.http.inject({
        method: "GET",
        url: `/v1/references?tag_names=${a}&tag_names=${b}&tag_match=any&limit=50`,
        headers,
      });
    },
  };
  const requests = Number(process.env.DATA_PATH_REQUESTS ?? 2000);
  const total: Record<string, number> = { fhello: 0, ahello: 0, reference: 0, page: 0 };
  for (let round = -1; round < requests / 100; round++) {
    for (const [name, send] of Object.entries(kinds)) {
      // CPU time of this process, not wall time: on a loaded machine the wait for a core is not the request's.
      const started = process.cpuUsage();
      for (let i = 0; i < 100; i++) {
        const response = await send();
        if (response.statusCode !== 200) throw new Error(`${name} answered ${response.statusCode}`);
      }
      const used = process.cpuUsage(started);
      // The first round warms up.
      if (round >= 0) total[name]! += (used.user + used.system) / 1000;
    }
  }
  const us = (name: string) => (total[name]! * 1000) / requests;
  console.log(
    `${kind} ${referenceCount} inject CPU µs/request: fhello ${us("fhello").toFixed(0)} ahello ${us("ahello").toFixed(0)} reference ${us("reference").toFixed(0)} page ${us("page").toFixed(0)}; reference ${(us("ahello") / us("reference")).toFixed(3)}x Apollo, page ${(us("fhello") / us("page")).toFixed(4)}x Fastify (load ${loadavg()[0]!.toFixed(2)})`,
  );
  await anchor.close();
  await apollo.stop();
}

async function main() {
  const database = await createTestDatabase(kind, "reftrail_data_path");
  let app = await startBenchApp(database.url);
  const { organization, apiKey } = await app.services.organizations.createOrganization("data-path");
  await app.close();
  const started = performance.now();
  const { referenceIds, tagNames } = await seed(database.url, organization.id);
  console.log(`${kind}: seeded ${referenceCount} references in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  if (process.env.DATA_PATH_MODE === "seed") {
    console.log(`SEEDED ${database.url} ${organization.id} ${apiKey.key} ${referenceIds[5]}`);
    return;
  }
  app = await startBenchApp(database.url);
  if (process.env.DATA_PATH_MODE === "inject") {
    await measureInjected(app, apiKey.key, referenceIds, tagNames);
    await app.close();
    await database.drop();
    return;
  }
  await app.http.listen({ host: "127.0.0.1", port: 0 });
  const address = app.http.server.address() as { port: number };
  const base = `http://127.0.0.1:${address.port}`;
  const baseline = await startBaseline();
  const load = new LoadGenerator();
  const headers = { "X-API-Key": apiKey.key, "Content-Type": "application/json", "Cache-Control": "no-cache" };
  const random = prng(7);
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)]!;
  const pairs = Array.from({ length: 400 }, () => {
    const a = pick(tagNames);
    let b = pick(tagNames);
    while (b === a) b = pick(tagNames);
    return { path: `/v1/references?tag_names=${a}&tag_names=${b}&tag_match=any&limit=50` };
  });
  const refs = Array.from({ length: 400 }, () => ({
    path: "/graphql",
    body: JSON.stringify({ query: REFERENCE_QUERY, variables: { id: pick(referenceIds) } }),
  }));
  const rows: Record<string, Omit<LoadSpec, "connections">> = {
    fhello: { url: `${baseline.url}/hello` },
    ahello: {
      url: `${baseline.url}/graphql`,
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: HELLO_QUERY,
    },
    reference: { url: `${base}/graphql`, method: "POST", headers, variants: refs },
    page: { url: `${base}/v1/references`, headers, variants: pairs },
  };
  // Sanity: both rows answer 200 with data.
  const probe = await fetch(`${base}${pairs[0]!.path}`, { headers });
  const probeBody = (await probe.json()) as { data?: unknown[] };
  const gql = await fetch(`${base}/graphql`, { method: "POST", headers, body: refs[0]!.body });
  const gqlBody = (await gql.json()) as { data?: { reference?: { events?: { edges?: unknown[] } } } };
  console.log(
    `   probe: page ${probe.status} ${probeBody.data?.length} rows; reference ${gql.status} ${gqlBody.data?.reference?.events?.edges?.length} events`,
  );
  for (let round = 1; round <= rounds; round++) {
    const rps: Record<string, number> = {};
    for (const [name, spec] of Object.entries(rows)) {
      if (rowsWanted && !rowsWanted.has(name)) continue;
      const profiling = process.env.DATA_PATH_PROFILE && !name.endsWith("hello");
      const session = profiling ? new (await import("node:inspector/promises")).Session() : null;
      if (session) {
        session.connect();
        await session.post("Profiler.enable");
        await session.post("Profiler.start");
      }
      const result = await load.run({ ...spec, connections, durationSeconds: seconds, warmupSeconds: 1 });
      if (session) {
        const { profile } = await session.post("Profiler.stop");
        writeFileSync(`${process.env.DATA_PATH_PROFILE}-${kind}-${name}.cpuprofile`, JSON.stringify(profile));
        session.disconnect();
      }
      rps[name] = result.rps;
      console.log(
        `${kind} ${referenceCount} round ${round} ${name}: ${result.rps.toFixed(0)} req/s p50 ${result.p50.toFixed(1)} p99 ${result.p99.toFixed(1)} non2xx ${result.non2xx} (load ${loadavg()[0]!.toFixed(2)})`,
      );
    }
    console.log(
      `${kind} ${referenceCount} round ${round}: reference ${(rps.reference! / rps.ahello!).toFixed(3)}x Apollo, page ${(rps.page! / rps.fhello!).toFixed(4)}x Fastify`,
    );
  }
  await load.close();
  await baseline.close();
  await app.close();
  await database.drop();
}

await main();
