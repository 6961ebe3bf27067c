import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import type { Database } from "../src/store/database.ts";
import type { TransactionalExecutor } from "../src/store/sql/executor.ts";
import { SqlLifecycleRepository } from "../src/store/sql/lifecycle-repository.ts";
import { SqlLiveLogStore } from "../src/store/sql/live-log-store.ts";
import { SqlOrganizationRepository } from "../src/store/sql/organization-repository.ts";
import { SESSION_SETTINGS } from "../src/store/sql/postgres-session.ts";
import type { Prisma } from "../src/store/sql/sql-template.ts";
import { SqlWebhookRecoveryRepository } from "../src/store/sql/webhook-recovery-repository.ts";
import { startTestServices, type TestServices } from "./support/test-server.ts";

/*
 * The log's other reads on PostgreSQL read only the months they need (the log is partitioned by month, migration
 * 0016; the pages of one reference are held to it in events-page-plans.test.ts): the live feed after a position,
 * a live replay, a webhook replay's batches after a cursor and its count, authentication's oldest visible event,
 * events by id within retention. Each statement the store sends is run with EXPLAIN (ANALYZE) under custom and
 * generic plans, and the months whose partitions it started are compared with the months it may need.
 */

const MONTH_MS = 30 * 86_400_000;

interface PlanNode {
  readonly "Relation Name"?: string;
  readonly "Actual Loops"?: number;
  readonly Plans?: PlanNode[];
}

const nodesOf = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodesOf)];

interface Recorded {
  readonly sql: string;
  readonly values: readonly unknown[];
}

function recording(executor: TransactionalExecutor, statements: Recorded[]): TransactionalExecutor {
  const record = (query: Prisma.Sql) => statements.push({ sql: query.text, values: query.values });
  return {
    ...executor,
    all: async <Row>(query: Prisma.Sql) => (record(query), executor.all<Row>(query)),
    values: async (query: Prisma.Sql) => (record(query), executor.values(query)),
    run: async (query: Prisma.Sql) => (record(query), executor.run(query)),
  } as TransactionalExecutor;
}

const asLiteral = (value: unknown): string => {
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return `{${value.map((item) => `"${String(item)}"`).join(",")}}`;
  return String(value);
};

describe("the log's reads on PostgreSQL start only the months they need", () => {
  let test: TestServices;
  let client: pg.Client;
  let organizationId: string;
  let apiKeyHash: string;
  let referenceId: string;
  /** Each partition of the log by name, with the first instant of its month. */
  let months: Map<string, Date>;
  let statements: Recorded[];
  let database: Database;

  beforeAll(async () => {
    test = await startTestServices("postgres");
    const { services } = test;
    const created = await services.organizations.createOrganization("partition plans");
    organizationId = created.organization.id;
    client = new pg.Client({ connectionString: test.database.url });
    await client.connect();
    const { rows: keys } = await client.query<{ key_hash: string }>(
      `SELECT "key_hash" FROM "api_keys" WHERE "organization_id" = $1`,
      [organizationId],
    );
    apiKeyHash = keys[0]!.key_hash;
    referenceId = (
      await services.references.createReference(organizationId, { bookingNumber: "PART1", carrierCode: "MAEU" })
    ).id;
    // Eight months of history (one transaction each), then the recent writes of the API (one commit each).
    await services.lifecycleLog.prepareMonths();
    for (let month = 8; month >= 1; month--) {
      const start = new Date(Date.now() - month * MONTH_MS);
      for (const instant of [start, new Date(start.getTime() + 14 * 86_400_000)]) {
        await client.query(`SELECT "lifecycle_events_ensure_month"($1::timestamp(3))`, [instant.toISOString()]);
      }
      await client.query(
        `INSERT INTO "lifecycle_events" ("id", "organization_id", "reference_id", "type", "occurred_at", "detail",
           "reference_tags")
         SELECT gen_random_uuid()::text, $1, $2, 'extraction_succeeded', $3::timestamp(3) + n * interval '10 minutes',
           '{}', '[]'
         FROM generate_series(1, 2000) AS n`,
        [organizationId, referenceId, start.toISOString()],
      );
    }
    for (let index = 0; index < 20; index++) {
      await services.referenceTracking.recordExtraction(organizationId, referenceId, { status: "succeeded" });
    }
    await client.query(`ANALYZE "lifecycle_events"`);
    await client.query(`ANALYZE "lifecycle_commits"`);
    await client.query(SESSION_SETTINGS);
    const { rows } = await client.query<{ name: string; starts_at: Date }>(
      `SELECT "partition"::text AS "name", "starts_at" FROM "lifecycle_events_months"()`,
    );
    months = new Map(rows.map((row) => [row.name, new Date(`${row.starts_at.toISOString().slice(0, 10)}T00:00:00Z`)]));
    expect(months.size).toBeGreaterThanOrEqual(10);
    statements = [];
    database = { ...test.database, sql: recording(test.database.sql, statements) } as Database;
  }, 180_000);

  afterAll(async () => {
    await client?.end();
    await test?.close();
  });

  /** The months (first instants, ISO dates) whose partitions `statement` started, under `mode`. */
  async function startedMonths(statement: Recorded, mode: string, name: string): Promise<string[]> {
    await client.query(`SET plan_cache_mode = ${mode}`);
    await client.query(`PREPARE ${name} AS ${statement.sql}`);
    const literals = statement.values.map((value) => client.escapeLiteral(asLiteral(value))).join(", ");
    const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${name}(${literals})`);
    await client.query(`DEALLOCATE ${name}`);
    const plan = (rows[0]["QUERY PLAN"] as { Plan: PlanNode }[])[0]!.Plan;
    return [
      ...new Set(
        nodesOf(plan)
          .filter((node) => (node["Actual Loops"] ?? 0) > 0 && months.has(node["Relation Name"] ?? ""))
          .map((node) => months.get(node["Relation Name"]!)!.toISOString().slice(0, 10)),
      ),
    ].sort();
  }

  /** The first instants (ISO dates) of the months from `from`'s to `to`'s. */
  function monthsBetween(from: Date, to: Date): string[] {
    const first = new Date(Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), 1));
    return [...months.values()]
      .filter((start) => start >= first && start <= to)
      .map((start) => start.toISOString().slice(0, 10))
      .sort();
  }

  /** Runs `read`, then holds each statement it sent on the log to the months `allowed` under both plan modes. */
  async function expectMonths(read: () => Promise<unknown>, allowed: string[]): Promise<void> {
    statements.length = 0;
    await read();
    const onLog = statements.filter((statement) => statement.sql.includes(`"lifecycle_events"`));
    expect(onLog.length).toBeGreaterThan(0);
    for (const [index, statement] of onLog.entries()) {
      for (const mode of ["force_custom_plan", "force_generic_plan"]) {
        const started = await startedMonths(statement, mode, `months_${index}_${mode}`);
        expect({ sql: statement.sql, mode, outside: started.filter((month) => !allowed.includes(month)) }).toEqual({
          sql: statement.sql,
          mode,
          outside: [],
        });
      }
    }
  }

  const now = () => new Date();
  const thisMonth = () => monthsBetween(now(), now());

  it("reads the live feed after a recent position from this month only", async () => {
    const live = new SqlLiveLogStore(database);
    const end = await live.findSettledEnd();
    // The position before the last five commits: each of them wrote this month.
    const after = { commit: end.commit - 5n, sequence: 0n };
    await expectMonths(() => live.readSettled({ organizationIds: [organizationId], after, limit: 100 }), thisMonth());
    await expectMonths(
      () =>
        live.readRange({
          organizationId,
          after,
          until: end,
          notBefore: new Date(Date.now() - 18 * MONTH_MS),
          limit: 100,
        }),
      thisMonth(),
    );
  });

  it("reads a webhook replay's batch and count from the months of its window, after its cursor", async () => {
    const recovery = new SqlWebhookRecoveryRepository("postgres", database.sql);
    const since = new Date(Date.now() - 5 * MONTH_MS);
    const until = new Date(Date.now() - 3 * MONTH_MS);
    const selection = { organizationId, since, until, eventTypes: null, tagIds: null };
    await expectMonths(() => recovery.countReplayable(selection), monthsBetween(since, until));
    const cursor = new Date(Date.now() - 4 * MONTH_MS);
    await expectMonths(
      () =>
        recovery.replayableEvents(selection, { occurredAt: cursor, id: "00000000-0000-7000-8000-000000000000" }, 50),
      monthsBetween(cursor, until),
    );
  });

  it("finds an organization's oldest visible event and its events by id within retention only", async () => {
    const notBefore = new Date(Date.now() - 2 * MONTH_MS);
    const organizations = new SqlOrganizationRepository(database, database.sql, false);
    // The oldest visible event is the first of the oldest month within retention: later months are never started.
    await expectMonths(
      () => organizations.findActiveApiKeysByHash([apiKeyHash], notBefore),
      monthsBetween(notBefore, notBefore),
    );
    const lifecycle = new SqlLifecycleRepository(database, database.sql, null, () => {});
    const { rows } = await client.query<{ id: string }>(
      `SELECT "id" FROM "lifecycle_events" WHERE "reference_id" = $1 ORDER BY "occurred_at" DESC LIMIT 3`,
      [referenceId],
    );
    await expectMonths(
      () =>
        lifecycle.findEventsByIds(
          organizationId,
          rows.map((row) => row.id),
          notBefore,
        ),
      monthsBetween(notBefore, new Date(Date.now() + 3 * MONTH_MS)),
    );
  });
});
