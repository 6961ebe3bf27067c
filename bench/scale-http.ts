import { readFileSync } from "node:fs";
import pg from "pg";
import { startReftrailChild } from "./server-child.ts";

/*
 * The `scale` part's reads over HTTP (issue 36: "newest events page / point read of the reference, p50, no
 * cache"): the real server in a child process over the seeded log, asked on loopback with `Cache-Control:
 * no-cache`, one request at a time. Every row is asked in turns, a batch of each per round, so that what else the
 * machine runs falls on all rows alike. Beside each p50, the CPU time per request of the server process and of
 * the database's backends together (/proc/<pid>/stat), which moves less with the machine's load than latency.
 */

export interface ScaleHttpInput {
  readonly databaseUrl: string;
  readonly apiKey: string;
  /** The reference holding 2 % of the log, and one holding an average share. */
  readonly references: { readonly big: string; readonly typical: string };
  /** Pages of 50 walked before the deep page (fewer when the reference has fewer). */
  readonly deepPages: number;
}

export interface HttpRow {
  readonly p50_ms: number;
  readonly cpu_ms_per_request: number;
}

const ROUNDS = 10;
const PER_BATCH = 20;
const WARMUP = 20;

const GRAPHQL_POINT = `query ScalePoint($id: ID!) { reference(id: $id) { id containerId carrierCode tags { id name } } }`;
const graphqlPage = (
  side: "first" | "last",
) => `query ScalePage($id: ID!) { reference(id: $id) { id containerId carrierCode tags { id name }
  events(${side}: 50) { edges { cursor node { id type occurredAt } } pageInfo { hasNextPage hasPreviousPage } } } }`;

/** User + system CPU time of a process, in ms (Linux: /proc/<pid>/stat, in clock ticks of 10 ms); 0 once gone. */
function cpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return 0;
  }
}

interface Request {
  readonly path: string;
  readonly body?: string;
}

export async function measureScaleOverHttp(input: ScaleHttpInput): Promise<Record<string, HttpRow | number>> {
  const server = await startReftrailChild(input.databaseUrl, { RETENTION_PRUNE_INTERVAL: "0" });
  const client = new pg.Client({ connectionString: input.databaseUrl });
  await client.connect();
  try {
    const headers = { "X-API-Key": input.apiKey, "Cache-Control": "no-cache", "Content-Type": "application/json" };
    const send = async ({ path, body }: Request): Promise<unknown> => {
      const response = await fetch(`${server.url}${path}`, body ? { method: "POST", headers, body } : { headers });
      const text = await response.text();
      if (!response.ok) throw new Error(`${path} -> ${response.status}: ${text.slice(0, 300)}`);
      const answer = JSON.parse(text) as { errors?: unknown };
      if (answer.errors) throw new Error(`${path}: ${JSON.stringify(answer.errors).slice(0, 300)}`);
      return answer;
    };
    const requests: Record<string, Request> = {};
    for (const [name, id] of Object.entries(input.references)) {
      const events = `/v1/references/${id}/events`;
      const graphql = (query: string) => ({ path: "/graphql", body: JSON.stringify({ query, variables: { id } }) });
      requests[`${name}_point`] = { path: `/v1/references/${id}` };
      requests[`${name}_newest_page`] = { path: `${events}?order=desc` };
      requests[`${name}_newest_page_100`] = { path: `${events}?order=desc&limit=100` };
      requests[`${name}_oldest_page`] = { path: `${events}?limit=50` };
      const cursor = await deepCursor(send, events, input.deepPages);
      // A reference whose log fits one page has no deep page.
      if (cursor !== undefined) requests[`${name}_deep_page`] = { path: `${events}?limit=50&cursor=${cursor}` };
      requests[`${name}_graphql_point`] = graphql(GRAPHQL_POINT);
      requests[`${name}_graphql_newest_page`] = graphql(graphqlPage("last"));
      requests[`${name}_graphql_oldest_page`] = graphql(graphqlPage("first"));
    }
    for (const request of Object.values(requests)) for (let index = 0; index < WARMUP; index++) await send(request);
    // The backends on the database once the server has opened its connections (ours is left out; the bench's own
    // pool is idle meanwhile).
    const { rows } = await client.query<{ pid: number }>(
      `SELECT "pid" FROM pg_stat_activity WHERE "datname" = current_database() AND "pid" <> pg_backend_pid()`,
    );
    const cpu = () => cpuMs(server.pid) + rows.reduce((sum, row) => sum + cpuMs(row.pid), 0);
    const samples = new Map<string, number[]>(Object.keys(requests).map((name) => [name, []]));
    const cpuTotals = new Map<string, number>();
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, request] of Object.entries(requests)) {
        const cpuBefore = cpu();
        for (let index = 0; index < PER_BATCH; index++) {
          const start = performance.now();
          await send(request);
          samples.get(name)!.push(performance.now() - start);
        }
        cpuTotals.set(name, (cpuTotals.get(name) ?? 0) + cpu() - cpuBefore);
      }
    }
    const report: Record<string, HttpRow | number> = {};
    for (const [name, values] of samples) {
      values.sort((a, b) => a - b);
      report[name] = {
        p50_ms: Number(values[Math.floor(values.length / 2)]!.toFixed(2)),
        cpu_ms_per_request: Number((cpuTotals.get(name)! / values.length).toFixed(2)),
      };
    }
    const p50 = (name: string) => (report[name] as HttpRow).p50_ms;
    const cpuOf = (name: string) => (report[name] as HttpRow).cpu_ms_per_request;
    for (const name of Object.keys(input.references)) {
      report[`${name}_newest_over_point`] = Number((p50(`${name}_newest_page`) / p50(`${name}_point`)).toFixed(2));
      report[`${name}_newest_over_point_cpu`] = Number(
        (cpuOf(`${name}_newest_page`) / cpuOf(`${name}_point`)).toFixed(2),
      );
      report[`${name}_oldest_over_newest`] = Number(
        (p50(`${name}_oldest_page`) / p50(`${name}_newest_page`)).toFixed(2),
      );
      report[`${name}_graphql_newest_over_point`] = Number(
        (p50(`${name}_graphql_newest_page`) / p50(`${name}_graphql_point`)).toFixed(2),
      );
    }
    return report;
  } finally {
    await client.end();
    await server.stop();
  }
}

/**
 * The cursor (URL-encoded) after `deepPages` pages of 50 in ascending order, or that of the reference's last page;
 * undefined when its log is one page.
 */
async function deepCursor(
  send: (request: Request) => Promise<unknown>,
  events: string,
  deepPages: number,
): Promise<string | undefined> {
  let cursor: string | undefined;
  for (let page = 0; page < deepPages; page++) {
    const suffix = cursor === undefined ? "" : `&cursor=${encodeURIComponent(cursor)}`;
    const answer = (await send({ path: `${events}?limit=50${suffix}` })) as { next_cursor: string | null };
    if (answer.next_cursor === null) break;
    cursor = answer.next_cursor;
  }
  return cursor === undefined ? undefined : encodeURIComponent(cursor);
}
