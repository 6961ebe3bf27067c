import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import type { LiveEvent } from "../src/domain/live/live-feed-ports.ts";
import { LOG_START, type LogPosition } from "../src/domain/live/log-position.ts";
import type { Database } from "../src/store/database.ts";
import type { TransactionalExecutor } from "../src/store/sql/executor.ts";
import { SqlLiveLogStore } from "../src/store/sql/live-log-store.ts";
import { SESSION_SETTINGS } from "../src/store/sql/postgres-session.ts";
import type { Prisma } from "../src/store/sql/sql-template.ts";
import { startTestServices, type TestServices } from "./support/test-server.ts";

/*
 * The feed's reads on PostgreSQL touch the commits a page needs, whatever the planner estimates (issue 49.3,
 * migration 0025). A log written in bulk (20 ingestions of 100 events, one transaction each) and a commit table
 * without statistics (as a new database has until its upkeep analyzes it): a page of 50 from the start of the log
 * read all 2,000 events and sorted them, every time, and a filtered scan of the organization held the instance's
 * reads for seconds. Each statement is run again under EXPLAIN (ANALYZE) and the event rows it read are counted.
 */

interface PlanNode {
  readonly "Relation Name"?: string;
  readonly "Actual Rows"?: number;
  readonly "Actual Loops"?: number;
  readonly Plans?: PlanNode[];
}

const nodesOf = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(nodesOf)];

const COMMITS = 20;
const EVENTS_PER_COMMIT = 100;

describe("the feed's reads of a log written in bulk, on postgres", () => {
  let test: TestServices;
  let client: pg.Client;
  let organizationId: string;
  let store: SqlLiveLogStore;
  const statements: Prisma.Sql[] = [];

  beforeAll(async () => {
    test = await startTestServices("postgres");
    const { services } = test;
    organizationId = (await services.organizations.createOrganization("bulk log")).organization.id;
    const reference = await services.references.createReference(organizationId, {
      bookingNumber: "BULK1",
      carrierCode: "MAEU",
    });
    for (let commit = 0; commit < COMMITS; commit++) {
      const items = Array.from({ length: EVENTS_PER_COMMIT }, (_, index) =>
        index === 0
          ? { kind: "extraction", referenceId: reference.id, status: "failed", error: { code: "X", message: "x" } }
          : { kind: "extraction", referenceId: reference.id, status: "succeeded" },
      );
      await services.ingestion.ingest(organizationId, { items });
    }
    client = new pg.Client({ connectionString: test.database.url });
    await client.connect();
    await client.query(SESSION_SETTINGS);
    const sql = test.database.sql;
    const recording = {
      ...sql,
      all: async <Row>(query: Prisma.Sql) => (statements.push(query), sql.all<Row>(query)),
    } as TransactionalExecutor;
    store = new SqlLiveLogStore({ ...test.database, sql: recording } as Database);
  }, 120_000);

  afterAll(async () => {
    await client?.end();
    await test?.close();
  });

  /** Event rows the statement reads from the log's partitions, run again under EXPLAIN (ANALYZE). */
  async function eventRowsRead(statement: Prisma.Sql): Promise<number> {
    const literals = statement.values.map((value) =>
      client.escapeLiteral(
        value instanceof Date
          ? value.toISOString()
          : Array.isArray(value)
            ? `{${value.map((item) => `"${String(item)}"`).join(",")}}`
            : String(value),
      ),
    );
    await client.query(`PREPARE feed_page AS ${statement.text}`);
    try {
      const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE feed_page(${literals.join(", ")})`);
      const plan = (rows[0]["QUERY PLAN"] as { Plan: PlanNode }[])[0]!.Plan;
      return nodesOf(plan)
        .filter((node) => node["Relation Name"]?.startsWith("lifecycle_events_y"))
        .reduce((sum, node) => sum + (node["Actual Rows"] ?? 0) * (node["Actual Loops"] ?? 0), 0);
    } finally {
      await client.query(`DEALLOCATE feed_page`);
    }
  }

  it("reads a page from the start of the log from its first commit, not from every event", async () => {
    statements.length = 0;
    const page = await store.readFeedPage({
      organizationId,
      after: LOG_START,
      notBefore: new Date(0),
      limit: 50,
    });
    expect(page.events).toHaveLength(50);
    expect(statements).toHaveLength(1);
    // One commit's events at most (the page is inside the first commit).
    expect(await eventRowsRead(statements[0]!)).toBeLessThanOrEqual(EVENTS_PER_COMMIT);
  });

  it("goes on where a filtered read stopped, and every event is read once, in order", async () => {
    // One failed extraction per commit: a page of 5 is never filled by the commits a read takes.
    const found: LiveEvent[] = [];
    let after: LogPosition = LOG_START;
    let reads = 0;
    for (;;) {
      statements.length = 0;
      const read = await store.readFeedPage({
        organizationId,
        after,
        notBefore: new Date(0),
        types: ["extraction_failed"],
        limit: 5,
      });
      reads += 1;
      expect(await eventRowsRead(statements[0]!)).toBeLessThanOrEqual(5 * EVENTS_PER_COMMIT);
      found.push(...read.events);
      if (read.events.length < 5 && !read.stoppedAt) break;
      after = read.stoppedAt ?? read.events.at(-1)!.position;
      expect(reads).toBeLessThan(50);
    }
    expect(found.map((live) => live.event.type)).toEqual(Array(COMMITS).fill("extraction_failed"));
    expect(new Set(found.map((live) => live.event.id)).size).toBe(COMMITS);
    const positions = found.map((live) => live.position.commit);
    expect([...positions].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(positions);
  });
});
