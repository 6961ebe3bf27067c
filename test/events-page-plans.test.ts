import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import type { EventListQuery } from "../src/domain/lifecycle/lifecycle-repository.ts";
import type { SqlExecutor } from "../src/store/sql/executor.ts";
import { SqlLifecycleRepository } from "../src/store/sql/lifecycle-repository.ts";
import { SESSION_SETTINGS } from "../src/store/sql/postgres-session.ts";
import type { Prisma } from "../src/store/sql/sql-template.ts";
import { startTestServices, type TestServices } from "./support/test-server.ts";

/*
 * PostgreSQL's plans for a page of one reference's lifecycle log, on a log where one reference holds most of the
 * events: the skew that once made a page cost 0.5–0.9 s instead of 0.1 ms (docs/decisions.md, "An events page's
 * plan"). PostgreSQL plans a prepared statement for its values five times, then may keep a generic plan made
 * without them; both must walk the (reference_id, occurred_at, id) index in the page's order and stop at the
 * limit. The log is partitioned by month (migration 0016) and spans seven months here: a page reads the months it
 * needs and no other (partitions left out when planned, when the plan starts, or never started by the ordered
 * Append once the limit is reached). The statements are the ones the store sends (recorded on their way to the
 * database), prepared on a connection with the store's session settings, and their plans read with EXPLAIN
 * (ANALYZE) EXECUTE under `plan_cache_mode` = force_custom_plan and force_generic_plan.
 */

const BIG_LOG_EVENTS = 30_000;
/** The big log's span, back from a minute ago: about one event every nine minutes, over six months. */
const BIG_LOG_DAYS = 182;
const SMALL_REFERENCES = 150;
const PAGE_INDEX = "lifecycle_events_reference_id_occurred_at_id_idx";

interface RecordedStatement {
  readonly sql: string;
  readonly values: readonly unknown[];
}

/** The store's executor, recording each statement's text and values as it passes them on. */
function recording(executor: SqlExecutor, statements: RecordedStatement[]): SqlExecutor {
  const record = (query: Prisma.Sql) => statements.push({ sql: query.text, values: query.values });
  return {
    all: async <Row>(query: Prisma.Sql) => (record(query), executor.all<Row>(query)),
    values: async (query: Prisma.Sql) => (record(query), executor.values(query)),
    run: async (query: Prisma.Sql) => (record(query), executor.run(query)),
  };
}

interface PlanNode {
  readonly "Node Type": string;
  readonly "Relation Name"?: string;
  readonly "Index Name"?: string;
  readonly "Actual Loops"?: number;
  readonly "Actual Rows"?: number;
  readonly Plans?: PlanNode[];
}

function nodesOf(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodesOf)];
}

/** The nodes from the first Limit down: the events page's own subquery. */
function pageNodes(plan: PlanNode): PlanNode[] {
  const limit = nodesOf(plan).find((node) => node["Node Type"] === "Limit");
  if (!limit) throw new Error(`no Limit in the plan: ${JSON.stringify(plan)}`);
  return nodesOf(limit);
}

describe("an events page's plans on PostgreSQL, one reference holding most of the log", () => {
  let test: TestServices;
  let organizationId: string;
  let bigReferenceId: string;
  let client: pg.Client;
  /** Each partition of the log that holds events, by name; and the parent of each partition's index. */
  let partitionsWithEvents: Set<string>;
  let indexParents: Map<string, string>;

  beforeAll(async () => {
    test = await startTestServices("postgres");
    const { services, database } = test;
    ({
      organization: { id: organizationId },
    } = await services.organizations.createOrganization("plans"));
    const big = await services.references.createReference(organizationId, {
      containerId: "CSQU3054383",
      carrierCode: "MSCU",
    });
    bigReferenceId = big.id;
    for (let index = 0; index < SMALL_REFERENCES; index++) {
      await services.references.createReference(organizationId, {
        bookingNumber: `PLAN${String(index).padStart(5, "0")}`,
        carrierCode: "MAEU",
      });
    }
    client = new pg.Client({ connectionString: database.url });
    await client.connect();
    // The big log, over six months, ending a minute ago; its months are made first, as the store makes a month
    // missing for an event.
    const oldest = new Date(Date.now() - BIG_LOG_DAYS * 86_400_000);
    await test.services.lifecycleLog.prepareMonths();
    for (let month = new Date(oldest); month < new Date(); month.setUTCMonth(month.getUTCMonth() + 1)) {
      await client.query(`SELECT "lifecycle_events_ensure_month"($1::timestamp(3))`, [month.toISOString()]);
    }
    await client.query(
      `INSERT INTO "lifecycle_events" ("id", "organization_id", "reference_id", "type", "occurred_at", "detail",
         "reference_tags")
       SELECT gen_random_uuid()::text, $1, $2, 'extraction_succeeded',
         (now() AT TIME ZONE 'UTC') - interval '1 minute' - ($4::int * interval '1 day') * (n::float8 / $3::int),
         '{}', '[]'
       FROM generate_series(1, $3::int) AS n`,
      [organizationId, bigReferenceId, BIG_LOG_EVENTS, BIG_LOG_DAYS],
    );
    await client.query(`ANALYZE "lifecycle_events"`);
    await client.query(SESSION_SETTINGS);
    const { rows: months } = await client.query<{ name: string }>(
      `SELECT "partition"::text AS "name" FROM "lifecycle_events_months"()`,
    );
    expect(months.length).toBeGreaterThanOrEqual(7);
    const { rows: filled } = await client.query<{ name: string }>(
      `SELECT DISTINCT "tableoid"::regclass::text AS "name" FROM "lifecycle_events"`,
    );
    partitionsWithEvents = new Set(filled.map((month) => month.name));
    const { rows: indexes } = await client.query<{ child: string; parent: string }>(
      `SELECT i."inhrelid"::regclass::text AS "child", i."inhparent"::regclass::text AS "parent"
       FROM pg_inherits i JOIN pg_index x ON x."indexrelid" = i."inhparent"
       WHERE x."indrelid" = '"lifecycle_events"'::regclass`,
    );
    indexParents = new Map(indexes.map((index) => [index.child, index.parent]));
  }, 120_000);

  afterAll(async () => {
    await client?.end();
    await test?.close();
  });

  /** The statements the store sends for pages of the big reference: asc and desc, first and next pages. */
  async function pageStatements(): Promise<RecordedStatement[]> {
    const statements: RecordedStatement[] = [];
    const repository = new SqlLifecycleRepository(
      test.database,
      recording(test.database.sql, statements),
      null,
      () => {},
    );
    const base = { referenceId: bigReferenceId, types: [], notBefore: new Date(Date.now() - 60 * 86_400_000) };
    for (const order of ["asc", "desc"] as const) {
      const first: EventListQuery = { ...base, order, limit: 51 };
      const page = await repository.listEventsOfReference(organizationId, first);
      expect(page).toHaveLength(51);
      const last = page!.at(-1)!;
      await repository.listEventsOfReference(organizationId, {
        ...first,
        after: { occurredAt: last.occurredAt, id: last.id },
      });
      await repository.findReferenceWithEvents(organizationId, { ...base, order, limit: 21 });
      // A window and a filter by type, as REST's from/to/type and GraphQL's arguments give them.
      await repository.listEvents({
        ...first,
        from: new Date(Date.now() - 86_400_000),
        to: new Date(),
        types: ["extraction_succeeded"],
        after: { occurredAt: last.occurredAt, id: last.id },
      });
    }
    return statements.filter((statement) => statement.sql.includes(`"lifecycle_events"`));
  }

  /**
   * How many months the statement's plain bounds on occurred_at (the partition key) cover: from the latest lower
   * bound (retention or `from`) to the earliest upper one, or to the months made
   * ahead (two after this one) when it has none.
   */
  const windowMonths = (statement: RecordedStatement): number => {
    const bounds = (operator: string) =>
      [...statement.sql.matchAll(new RegExp(`e\\."occurred_at" ${operator} \\$(\\d+)`, "g"))].map((match) =>
        Number(statement.values[Number(match[1]) - 1] as Date),
      );
    const lower = Math.max(...bounds(">="));
    const uppers = bounds("<=");
    const now = new Date();
    const upper = uppers.length > 0 ? Math.min(...uppers) : Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 2, 1);
    const monthOf = (instant: number) => new Date(instant).getUTCFullYear() * 12 + new Date(instant).getUTCMonth();
    return monthOf(upper) - monthOf(lower) + 1;
  };

  /** A bound value as the text of its literal: a list (bound as one array, as the type filter is) as an array's. */
  const asLiteral = (value: unknown): string => {
    if (value instanceof Date) return value.toISOString();
    if (Array.isArray(value))
      return `{${value.map((item) => `"${String(item).replace(/["\\]/g, "\\$&")}"`).join(",")}}`;
    return String(value);
  };

  it.each(["force_custom_plan", "force_generic_plan"])(
    "walks the page's index in order, in the months it needs only, and stops at the limit (%s)",
    async (mode) => {
      const statements = await pageStatements();
      expect(statements).toHaveLength(8);
      await client.query(`SET plan_cache_mode = ${mode}`);
      for (const [index, statement] of statements.entries()) {
        const name = `page_${mode}_${index}`;
        await client.query(`PREPARE ${name} AS ${statement.sql}`);
        // EXECUTE takes its arguments as literals (EXPLAIN EXECUTE has no bind parameters of its own).
        const literals = statement.values.map((value) => client.escapeLiteral(asLiteral(value))).join(", ");
        const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE ${name}(${literals})`);
        const plan = (rows[0]["QUERY PLAN"] as { Plan: PlanNode }[])[0]!.Plan;
        const page = pageNodes(plan);
        // The log's partitions are the scans' relations: lifecycle_events_y2026m11 and the like.
        const scans = page.filter((node) => node["Relation Name"]?.startsWith("lifecycle_events"));
        const described = `${statement.sql}\n${JSON.stringify(plan, null, 1)}`;
        expect({
          statement: described,
          indexes: [...new Set(scans.map((scan) => indexParents.get(scan["Index Name"] ?? "") ?? scan["Index Name"]))],
        }).toEqual({ statement: described, indexes: [PAGE_INDEX] });
        expect({
          statement: described,
          sorts: page.filter((node) => node["Node Type"].includes("Sort")).map((node) => node["Node Type"]),
        }).toEqual({ statement: described, sorts: [] });
        // The months outside the page's window (retention, from/to, the cursor's time) are left out: never planned
        // (custom plans) or removed when the plan started (generic plans).
        const started = scans.filter((scan) => (scan["Actual Loops"] ?? 0) > 0).map((scan) => scan["Relation Name"]!);
        expect({ statement: described, started: started.length <= windowMonths(statement) }).toEqual({
          statement: described,
          started: true,
        });
        // Each month started gives the merge its next row, and the read stops at the limit: at most one row per
        // month beyond the page (and a type filter's rows that fail it).
        const limit = Number(/LIMIT (\d+)/.exec(statement.sql)![1]);
        const rowsRead = scans.reduce((sum, scan) => sum + (scan["Actual Rows"] ?? 0) * (scan["Actual Loops"] ?? 0), 0);
        expect({ statement: described, rows: rowsRead <= limit + started.length }).toEqual({
          statement: described,
          rows: true,
        });
        expect(partitionsWithEvents.size).toBeGreaterThanOrEqual(6);
      }
    },
  );
});
