/*
 * What a soak run sets up around the server (bench/soak.ts): five webhook endpoints on the receivers, 50 live
 * subscriptions in a child process, the traffic's rows, and, at the end, the events the database holds, which say
 * what each endpoint and subscription should have received.
 */
import { fork, type ChildProcess } from "node:child_process";
import Sqlite from "better-sqlite3";
import pg from "pg";
import { sqliteFilePath } from "../src/store/database.ts";
import { readSpecs, sampleIds } from "./data-path.bench.ts";
import type { SeededData } from "./data-seed.ts";
import type { LoadSpec } from "./load.ts";
import type { Kind } from "./seed.ts";
import type { ReceiverPath } from "./soak-receiver.ts";
import type { TrafficRow } from "./soak-traffic.ts";

export interface SoakEndpoint extends ReceiverPath {
  readonly path: string;
  /** Its filters, as POST /v1/webhooks takes them (url and ordering apart). */
  readonly eventTypes?: readonly string[];
  /** The name of the one tag it filters on. */
  readonly tagName?: string;
  readonly ordering?: "reference";
  /** The endpoint the periodic replay targets. */
  readonly replayed?: boolean;
}

/** Five endpoints: every event, ordered, failing a tenth of the time, one event type, one tag. */
export const SOAK_ENDPOINTS: readonly SoakEndpoint[] = [
  { path: "/all", replayed: true },
  { path: "/ordered", ordering: "reference", ordered: true },
  { path: "/flaky", failRatio: 0.1 },
  { path: "/updates", eventTypes: ["reference_update_created"] },
  { path: "/tagged", tagName: "tag-0000" },
];

/** Share of the writes that are reference updates; the rest are extraction outcomes. */
const UPDATE_SHARE = 0.1;

async function call(origin: string, apiKey: string, method: string, path: string, body?: unknown): Promise<any> {
  const response = await fetch(`${origin}${path}`, {
    method,
    headers: { "X-API-Key": apiKey, ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path} answered ${response.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

/** Creates the endpoints through REST; returns each path's endpoint id and tag filter (tag id). */
export async function createEndpoints(
  origin: string,
  apiKey: string,
  receiverUrl: (path: string) => string,
): Promise<Map<string, { id: string; tagId?: string }>> {
  const created = new Map<string, { id: string; tagId?: string }>();
  for (const endpoint of SOAK_ENDPOINTS) {
    let tagId: string | undefined;
    if (endpoint.tagName) {
      const tags = await call(origin, apiKey, "GET", `/v1/tags?name_prefix=${endpoint.tagName}&limit=1`);
      tagId = tags.data[0]?.id;
      if (!tagId) throw new Error(`no tag named ${endpoint.tagName}`);
    }
    const body = await call(origin, apiKey, "POST", "/v1/webhooks", {
      url: receiverUrl(endpoint.path),
      description: `soak ${endpoint.path}`,
      ...(endpoint.eventTypes && { event_types: endpoint.eventTypes }),
      ...(tagId && { tag_ids: [tagId] }),
      ...(endpoint.ordering && { ordering: endpoint.ordering }),
    });
    created.set(endpoint.path, { id: body.id, tagId });
  }
  return created;
}

/** POST /v1/webhooks/{id}/replay for [since, now): the count it scheduled, or the status it refused with. */
export async function replay(origin: string, apiKey: string, endpointId: string, since: Date) {
  const response = await fetch(`${origin}/v1/webhooks/${endpointId}/replay`, {
    method: "POST",
    headers: { "X-API-Key": apiKey, "Content-Type": "application/json" },
    body: JSON.stringify({ since: since.toISOString(), until: new Date().toISOString() }),
  });
  const body = (await response.json().catch(() => ({}))) as { count?: number };
  return { status: response.status, count: body.count ?? 0 };
}

const toRow = (name: string, share: number, spec: Omit<LoadSpec, "connections">): TrafficRow => ({
  name,
  share,
  method: spec.method ?? "GET",
  headers: spec.headers ?? {},
  variants: spec.variants ?? [{ path: new URL(spec.url).pathname, body: spec.body }],
});

/**
 * The organization's API keys the load spreads over (`POST /v1/api-keys`, default budgets): a deployment's clients
 * each hold their own, and the per-minute limit (600 a key, per instance) is meant for one client, not for the
 * whole load. `count` keys at the soak's rates stay well under it.
 */
export async function createKeyPool(origin: string, apiKey: string, count: number): Promise<string[]> {
  const keys: string[] = [];
  for (let index = 0; index < count; index++) {
    const created = await call(origin, apiKey, "POST", "/v1/api-keys", {
      name: `soak client ${index}`,
      scopes: ["references:read", "references:write"],
    });
    keys.push(created.key as string);
  }
  return keys;
}

/** `variants` with the pool's keys in turn (each request picks a variant at random, so the keys share the load). */
export function overKeys<Variant extends { readonly path: string }>(
  variants: readonly Variant[],
  keys: readonly string[],
) {
  const spread = variants.length >= keys.length ? variants : keys.map((_, index) => variants[index % variants.length]!);
  return spread.map((variant, index) => ({ ...variant, headers: { "X-API-Key": keys[index % keys.length]! } }));
}

/** The read mix (a third each, random keys, no cache) and its closed-loop specs for measuring capacity. */
export async function readRows(origin: string, apiKey: string, seeded: SeededData) {
  const specs = await readSpecs(origin, apiKey, seeded);
  return {
    specs,
    rows: [
      toRow("GraphQL reference", 1, specs.reference),
      toRow("REST two-tag page", 1, specs.restPage),
      toRow("GraphQL two-tag page", 1, specs.graphqlPage),
    ],
  };
}

/** Extraction outcomes and reference updates POSTed to random references. */
export function writeRows(apiKey: string, seeded: SeededData): TrafficRow[] {
  const headers = { "X-API-Key": apiKey, "Content-Type": "application/json" };
  const ids = sampleIds(seeded.referenceIds);
  return [
    {
      name: "extraction outcome",
      share: 1 - UPDATE_SHARE,
      method: "POST",
      headers,
      variants: ids.map((id) => ({
        path: `/v1/references/${id}/extractions`,
        body: JSON.stringify({ status: "succeeded" }),
      })),
    },
    {
      name: "reference update",
      share: UPDATE_SHARE,
      method: "POST",
      headers,
      variants: ids.map((id) => ({ path: `/v1/references/${id}/updates`, body: JSON.stringify({ note: "soak" }) })),
    },
  ];
}

// ---------------------------------------------------------------------------------------------------------------

const SUBSCRIPTION = `subscription Soak($referenceId: ID) {
  lifecycleEvents(referenceId: $referenceId) { cursor node { id type occurredAt referenceId } }
}`;

/** graphql-ws clients in a child process (bench/subscription-clients.mjs), one connection per reference. */
export class SubscriptionClients {
  private readonly child: ChildProcess = fork(new URL("./subscription-clients.mjs", import.meta.url), {
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });

  private next(type: string): Promise<any> {
    return new Promise((resolve) => {
      const onMessage = (message: { type: string }) => {
        if (message.type !== type) return;
        this.child.off("message", onMessage);
        resolve(message);
      };
      this.child.on("message", onMessage);
    });
  }

  async open(origin: string, apiKey: string, referenceIds: readonly string[]): Promise<void> {
    const opened = this.next("opened");
    this.child.send({
      type: "open",
      url: `${origin.replace(/^http/, "ws")}/graphql`,
      apiKey,
      referenceIds,
      query: SUBSCRIPTION,
    });
    await opened;
  }

  /** Every event received so far (first arrival, epoch ms) and the errors the clients saw. */
  async received(): Promise<{ receipts: Map<string, number>; errors: string[] }> {
    const answer = this.next("received");
    this.child.send({ type: "report" });
    const { receipts, errors } = (await answer) as { receipts: [string, number][]; errors: string[] };
    return { receipts: new Map(receipts), errors };
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      const kill = setTimeout(() => this.child.kill(), 10_000);
      this.child.once("exit", () => resolve(clearTimeout(kill)));
      this.child.send({ type: "stop" });
    });
  }
}

// ---------------------------------------------------------------------------------------------------------------

export interface StoredEvent {
  readonly id: string;
  readonly type: string;
  readonly referenceId: string;
  readonly occurredAt: number;
  readonly tagIds: readonly string[];
}

/** The organization's events written from `sinceMs` on, read with the database's own driver (not the server). */
export async function eventsSince(kind: Kind, url: string, organizationId: string, sinceMs: number) {
  type Raw = { id: string; type: string; reference_id: string; at: string | number; reference_tags: unknown };
  let rows: Raw[];
  if (kind === "sqlite") {
    const sqlite = new Sqlite(sqliteFilePath(url), { readonly: true });
    try {
      rows = sqlite
        .prepare(
          `SELECT "id", "type", "reference_id", "occurred_at" AS "at", "reference_tags" FROM "lifecycle_events"
           WHERE "organization_id" = ?`,
        )
        .all(organizationId) as Raw[];
    } finally {
      sqlite.close();
    }
  } else {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      // A timestamp without time zone holds UTC: its epoch is taken as such.
      const result = await client.query<Raw>(
        `SELECT "id", "type", "reference_id", extract(epoch FROM "occurred_at") * 1000 AS "at", "reference_tags"
         FROM "lifecycle_events" WHERE "organization_id" = $1`,
        [organizationId],
      );
      rows = result.rows;
    } finally {
      await client.end();
    }
  }
  return rows
    .map((row) => ({
      id: row.id,
      type: row.type,
      referenceId: row.reference_id,
      occurredAt: typeof row.at === "string" && kind === "sqlite" ? Date.parse(row.at) : Number(row.at),
      tagIds: (
        (typeof row.reference_tags === "string" ? JSON.parse(row.reference_tags) : (row.reference_tags ?? [])) as {
          id: string;
        }[]
      ).map((tag) => tag.id),
    }))
    .filter((event) => event.occurredAt >= sinceMs) satisfies StoredEvent[];
}

/** Whether an endpoint's filters match an event (types AND tags, tags by the event's snapshot). */
export function matches(endpoint: SoakEndpoint, tagId: string | undefined, event: StoredEvent): boolean {
  if (endpoint.eventTypes && !endpoint.eventTypes.includes(event.type)) return false;
  return tagId === undefined || event.tagIds.includes(tagId);
}
