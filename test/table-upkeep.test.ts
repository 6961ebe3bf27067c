import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { expectEventually } from "./support/expect-eventually.ts";
import { startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * Vacuum where autovacuum is off (src/store/sql/table-upkeep.ts), PostgreSQL only: the table is told
 * `autovacuum_enabled = false`, so the test means the same whether the server's own autovacuum is on or off.
 */

async function tableStatistics(url: string, table: string) {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ vacuums: number; analyzes: number; dead: number }>(
      `SELECT vacuum_count::int AS "vacuums", analyze_count::int AS "analyzes", n_dead_tup::int AS "dead"
       FROM pg_stat_user_tables WHERE relname = $1`,
      [table],
    );
    return rows[0]!;
  } finally {
    await client.end();
  }
}

describe("vacuum where autovacuum is off, on postgres", () => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer("postgres", { env: { VACUUM_CHECK_INTERVAL: "50ms" } });
  });

  afterAll(async () => {
    await server.close();
  });

  it("vacuums a table that autovacuum leaves alone once it holds more dead rows than the threshold", async () => {
    const client = new pg.Client({ connectionString: server.database.url });
    await client.connect();
    await client.query(`ALTER TABLE "tags" SET (autovacuum_enabled = false)`);
    const before = await tableStatistics(server.database.url, "tags");
    // 2,000 dead rows, past the threshold of 1,000 (5 % of the live rows being less).
    await client.query(
      `INSERT INTO "tags" ("id", "organization_id", "name", "name_key", "created_at", "updated_at")
       SELECT gen_random_uuid()::text, $1, 'churn ' || n, 'churn ' || n, now(), now() FROM generate_series(1, 2000) n`,
      [server.organizationId],
    );
    await client.query(`DELETE FROM "tags" WHERE "name" LIKE 'churn %'`);
    // A backend reports its statistics as it ends.
    await client.end();
    await expectEventually(
      () => tableStatistics(server.database.url, "tags"),
      (statistics) => {
        expect(statistics.vacuums).toBeGreaterThan(before.vacuums);
        expect(statistics.dead).toBeLessThan(1_000);
      },
    );
  });

  it("analyzes a small table after autovacuum's own threshold of changed rows, far below the vacuum's", async () => {
    // A small table without statistics misleads the planner most (the feed's reads were planned as a sort of a
    // whole organization's log while lifecycle_commits had 201 rows and no statistics).
    const client = new pg.Client({ connectionString: server.database.url });
    await client.connect();
    await client.query(`ALTER TABLE "tags" SET (autovacuum_enabled = false)`);
    const before = await tableStatistics(server.database.url, "tags");
    // 60 new rows: past 50 + 10 % of the table's few live rows, far under the vacuum's 1,000.
    await client.query(
      `INSERT INTO "tags" ("id", "organization_id", "name", "name_key", "created_at", "updated_at")
       SELECT gen_random_uuid()::text, $1, 'small ' || n, 'small ' || n, now(), now() FROM generate_series(1, 60) n`,
      [server.organizationId],
    );
    await client.end();
    await expectEventually(
      () => tableStatistics(server.database.url, "tags"),
      (statistics) => expect(statistics.analyzes).toBeGreaterThan(before.analyzes),
    );
  });
});
