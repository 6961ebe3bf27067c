import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { newId } from "../src/domain/shared/ids.ts";
import { ManualClock, startTestServices, type TestServices } from "./support/test-server.ts";

/*
 * PostgreSQL's lifecycle log partitioned by month (migration 0016; docs/decisions.md, "The log partitioned by
 * month"): events land in their month's partition, at its edges, in a month made ahead and in one made on demand;
 * rows written straight into the log (the seven columns only) in a month made by hand get their live positions;
 * retention drops whole months found by their bounds, while writers and readers go on.
 */

const OUTCOME = { status: "succeeded" };

/*
 * The migration makes the months around the database's real clock, so every instant here is placed relative to
 * the day the test runs: the test's clock stands a year ahead of the real month, past every month the migration
 * made, and the months it expects are counted from there. Nothing depends on the date the suite runs on.
 */
const realMonth = new Date();
/** The first instant (UTC) of the month `offset` months after the test clock's month. */
function monthStart(offset: number): Date {
  return new Date(Date.UTC(realMonth.getUTCFullYear(), realMonth.getUTCMonth() + 12 + offset, 1));
}
/** `YYYY-MM-DD` of monthStart(offset), as the months function reports its bounds. */
function monthDay(offset: number): string {
  return monthStart(offset).toISOString().slice(0, 10);
}
/** `YYYY-M` of monthStart(offset), as monthsOfEvents labels a month. */
function monthLabel(offset: number): string {
  const start = monthStart(offset);
  return `${start.getUTCFullYear()}-${start.getUTCMonth() + 1}`;
}
const lastMillisecondOf = (offset: number): Date => new Date(monthStart(offset + 1).getTime() - 1);
/** The test clock's "now": the 22nd of its month at noon. */
const TODAY = new Date(monthStart(0).getTime() + (21 * 24 + 12) * 3_600_000);

describe("the lifecycle log's months on PostgreSQL", () => {
  const clock = new ManualClock(TODAY);
  let test: TestServices;
  let client: pg.Client;
  let organizationId: string;

  beforeAll(async () => {
    test = await startTestServices("postgres", clock);
    ({
      organization: { id: organizationId },
    } = await test.services.organizations.createOrganization("months"));
    client = new pg.Client({ connectionString: test.database.url });
    await client.connect();
  }, 60_000);

  afterAll(async () => {
    await client?.end();
    await test?.close();
  });

  /** The month (its partition's lower bound, ISO) each event of the reference is stored in, oldest first. */
  async function monthsOfEvents(referenceId: string): Promise<{ type: string; month: string }[]> {
    const { rows } = await client.query<{ type: string; month: Date }>(
      `SELECT e."type", m."starts_at" AS "month" FROM "lifecycle_events" e
       JOIN "lifecycle_events_months"() m ON m."partition" = e."tableoid"::regclass
       WHERE e."reference_id" = $1 ORDER BY e."occurred_at", e."id"`,
      [referenceId],
    );
    return rows.map((row) => ({ type: row.type, month: `${row.month.getFullYear()}-${row.month.getMonth() + 1}` }));
  }

  async function newReference(): Promise<string> {
    const reference = await test.services.references.createReference(organizationId, {
      bookingNumber: `MONTH${newId().slice(-8)}`,
      carrierCode: "MAEU",
    });
    return reference.id;
  }

  it("stores an event at a month's first and last millisecond, in a month made ahead, and one made on demand", async () => {
    clock.set(TODAY);
    await test.services.lifecycleLog.prepareMonths();
    const { rows: ahead } = await client.query<{ n: string }>(
      `SELECT COUNT(*) AS "n" FROM "lifecycle_events_months"() WHERE "starts_at" = $1::date`,
      [monthDay(2)],
    );
    expect(Number(ahead[0]!.n)).toBe(1);
    const { rows: missing } = await client.query<{ n: string }>(
      `SELECT COUNT(*) AS "n" FROM "lifecycle_events_months"() WHERE "starts_at" = $1::date`,
      [monthDay(3)],
    );
    expect(Number(missing[0]!.n)).toBe(0);

    const instants = [lastMillisecondOf(1), monthStart(2), lastMillisecondOf(2), monthStart(3)];
    clock.set(instants[0]!);
    const referenceId = await newReference();
    clock.set(instants[1]!);
    await test.services.referenceTracking.recordExtraction(organizationId, referenceId, OUTCOME);
    clock.set(instants[2]!);
    await test.services.referenceTracking.recordExtraction(organizationId, referenceId, OUTCOME);
    // The month three ahead has no partition yet: the unit of work makes it and runs again.
    clock.set(instants[3]!);
    await test.services.referenceTracking.recordExtraction(organizationId, referenceId, OUTCOME);

    expect(await monthsOfEvents(referenceId)).toEqual([
      { type: "reference_created", month: monthLabel(1) },
      { type: "extraction_succeeded", month: monthLabel(2) },
      { type: "extraction_succeeded", month: monthLabel(2) },
      { type: "extraction_succeeded", month: monthLabel(3) },
    ]);
    const page = await test.services.lifecycleLog.listEvents(organizationId, referenceId, { limit: 10 });
    expect(page.items.map((event) => event.occurredAt.toISOString())).toEqual(
      instants.map((instant) => instant.toISOString()),
    );
  });

  it("gives rows written straight in a month made by hand their live order, and drops that month by its bounds", async () => {
    clock.set(TODAY);
    const referenceId = await newReference();
    // As an import would: a partition under a name of its own, the seven columns only.
    // 22 months before the test clock's month: wholly past the 18 months of retention.
    await client.query(
      `CREATE TABLE "imported_month" PARTITION OF "lifecycle_events" FOR VALUES FROM ('${monthDay(-22)}') TO ('${monthDay(-21)}')`,
    );
    await client.query(
      `INSERT INTO "lifecycle_events" ("id", "organization_id", "reference_id", "type", "occurred_at", "detail",
         "reference_tags")
       SELECT gen_random_uuid()::text, $1, $2, 'extraction_succeeded',
         $3::timestamp(3) + interval '9 days' + n * interval '1 hour', '{}', '[]'
       FROM generate_series(1, 3) AS n`,
      [organizationId, referenceId, monthDay(-22)],
    );
    const { rows: events } = await client.query<{ position: string | null; transaction_id: string | null }>(
      `SELECT "position", "transaction_id" FROM "imported_month"`,
    );
    expect(events).toHaveLength(3);
    for (const event of events) {
      expect(event.position).not.toBeNull();
      expect(event.transaction_id).not.toBeNull();
    }
    const { rows: commits } = await client.query<{ first_occurred_at: Date; last_occurred_at: Date }>(
      `SELECT c."first_occurred_at", c."last_occurred_at" FROM "lifecycle_commits" c
       WHERE c."transaction_id" = $1 AND c."organization_id" = $2`,
      [events[0]!.transaction_id, organizationId],
    );
    expect(commits).toHaveLength(1);

    // The prune reports the catalog's estimate of what it dropped (it reads no row): statistics make it exact.
    await client.query(`ANALYZE "imported_month"`);
    const pruned = await test.services.lifecycleLog.pruneExpiredEvents();
    expect(pruned).toBeGreaterThanOrEqual(3);
    const { rows: left } = await client.query<{ present: boolean }>(
      `SELECT to_regclass('"imported_month"') IS NOT NULL AS "present"`,
    );
    expect(left[0]!.present).toBe(false);
    const { rows: commitsLeft } = await client.query(
      `SELECT 1 FROM "lifecycle_commits" WHERE "transaction_id" = $1 AND "organization_id" = $2`,
      [events[0]!.transaction_id, organizationId],
    );
    expect(commitsLeft).toHaveLength(0);
  });

  it("prunes whole months while writers and readers run: no error, nothing acknowledged lost", async () => {
    clock.set(TODAY);
    const written = await newReference();
    const old = await newReference();
    // Four months past retention, 5,000 events each.
    for (const month of [-24, -23, -22, -21].map(monthDay)) {
      await client.query(`SELECT "lifecycle_events_ensure_month"($1::timestamp(3))`, [month]);
      await client.query(
        `INSERT INTO "lifecycle_events" ("id", "organization_id", "reference_id", "type", "occurred_at", "detail",
           "reference_tags")
         SELECT gen_random_uuid()::text, $1, $2, 'extraction_succeeded',
           $3::timestamp(3) + n * interval '5 minutes', '{}', '[]'
         FROM generate_series(1, 5000) AS n`,
        [organizationId, old, month],
      );
    }
    // The prune reports the catalog's estimate of what it dropped: statistics of the old months make it exact.
    for (const month of [-24, -23, -22, -21].map(monthDay)) {
      const { rows: partitions } = await client.query<{ partition: string }>(
        `SELECT "partition"::text AS "partition" FROM "lifecycle_events_months"() WHERE "starts_at" = $1::timestamp(3)`,
        [month],
      );
      for (const { partition } of partitions) await client.query(`ANALYZE ${partition}`);
    }
    let pruning = true;
    const errors: unknown[] = [];
    let acknowledged = 0;
    const writer = async () => {
      while (pruning) {
        await test.services.referenceTracking.recordExtraction(organizationId, written, OUTCOME);
        acknowledged += 1;
      }
    };
    const reader = async () => {
      while (pruning) {
        await test.services.lifecycleLog.listEvents(organizationId, written, { limit: 20, order: "desc" });
      }
    };
    const running = [writer(), writer(), reader(), reader()].map((work) =>
      work.catch((error: unknown) => {
        errors.push(error);
      }),
    );
    // Each side has done something before the prune starts.
    while (acknowledged < 4) await new Promise((resolve) => setImmediate(resolve));
    const pruned = await test.services.lifecycleLog.pruneExpiredEvents();
    pruning = false;
    await Promise.all(running);

    expect(errors).toEqual([]);
    expect(pruned).toBeGreaterThanOrEqual(20_000);
    const { rows } = await client.query<{ type: string; n: string }>(
      `SELECT "reference_id" AS "type", COUNT(*) AS "n" FROM "lifecycle_events"
       WHERE "reference_id" = ANY($1) AND "type" = 'extraction_succeeded' GROUP BY "reference_id"`,
      [[written, old]],
    );
    expect(rows.map((row) => [row.type, Number(row.n)])).toEqual([[written, acknowledged]]);
  }, 120_000);
});
