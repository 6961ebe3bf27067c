import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { WebhookEndpoint } from "../src/domain/webhooks/webhook-models.ts";
import { openDatabase, type Database } from "../src/store/database.ts";
import { SecretCipher } from "../src/store/secret-cipher.ts";
import type { SqlExecutor } from "../src/store/sql/executor.ts";
import { SqlLiveLogStore } from "../src/store/sql/live-log-store.ts";
import { SqlWebhookRepository } from "../src/store/sql/webhook-repository.ts";
import { Prisma } from "../src/store/__generated__/sqlite/client.ts";
import { expectEventually } from "./support/expect-eventually.ts";
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from "./support/test-server.ts";

/*
 * The executors (src/store/sql/): a unit of work is passed explicitly, and only the statements sent through the
 * unit's executor are part of it. On SQLite the executor shares Prisma's one connection, where a statement sent
 * while a unit is open would join its transaction: a write from outside must wait for the unit and survive its
 * rollback, a read from outside must see only what has committed. A repository built on a unit's executor (the
 * webhook repository here) runs every statement in the unit: its reads see the unit's writes, and its writes
 * commit or roll back with the unit.
 */

describe.each(DATABASE_KINDS)("units of work on the executor on %s", (kind) => {
  let testDatabase: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDatabase = await createTestDatabase(kind);
    database = await openDatabase(testDatabase.url);
  });
  afterAll(async () => {
    await database?.close();
    await testDatabase?.drop();
  });

  const cipher = new SecretCipher(randomBytes(32));
  /** The webhook repository on an executor: the driver, or a unit's. */
  const webhooksOn = (sql: SqlExecutor) => new SqlWebhookRepository(database.provider, sql, cipher);
  const endpoint = (id: string): WebhookEndpoint => {
    const at = new Date();
    return {
      id,
      organizationId: "b-organization",
      url: "http://127.0.0.1:9/hooks",
      destination: null,
      eventTypes: ["reference_created"],
      tagIds: null,
      description: null,
      enabled: true,
      disabledReason: null,
      secret: `whsec_${id}`,
      signing: "hmac-sha256",
      publicKey: null,
      maxDeliveriesPerSecond: null,
      previousSecrets: [],
      previousSecretExpiresAt: null,
      failingSince: null,
      ordering: "none",
      createdAt: at,
      updatedAt: at,
      version: 0,
    };
  };

  const insertOrganization = (id: string) =>
    Prisma.sql`INSERT INTO "organizations" ("id", "name", "created_at") VALUES (${id}, ${id}, ${new Date()})`;
  const organizationIds = async (prefix: string) =>
    (
      await database.sql.all<{ id: string }>(
        Prisma.sql`SELECT "id" FROM "organizations" WHERE "id" LIKE ${`${prefix}%`} ORDER BY "id"`,
      )
    ).map((row) => row.id);

  it("keeps a write issued outside a unit of work that rolls back, and lets reads run meanwhile", async () => {
    let outside: Promise<number> | undefined;
    let readDuringUnit: string[] | undefined;
    await expect(
      database.sql.transaction(async (unit) => {
        await unit.run(insertOrganization("a-inside"));
        outside = database.sql.run(insertOrganization("a-outside"));
        readDuringUnit = await organizationIds("a-");
        await new Promise((resolve) => setTimeout(resolve, 20));
        throw new Error("rolled back on purpose");
      }),
    ).rejects.toThrow("rolled back on purpose");
    expect(await outside).toBe(1);
    expect(readDuringUnit).toBeDefined();
    expect(await organizationIds("a-")).toEqual(["a-outside"]);
  });

  it("shows a read outside a unit of work only what has committed", async () => {
    let readDuringUnit: string[] | undefined;
    await database.sql.transaction(async (unit) => {
      await unit.run(insertOrganization("d-inside"));
      readDuringUnit = await organizationIds("d-");
    });
    expect(readDuringUnit).toEqual([]);
    expect(await organizationIds("d-")).toEqual(["d-inside"]);
  });

  it("runs the webhook repository's statements in the unit of work that built it, and rolls them back with it", async () => {
    let readInside: WebhookEndpoint | null = null;
    let readOutside: WebhookEndpoint | null | undefined;
    await expect(
      database.sql.transaction(async (unit) => {
        await webhooksOn(unit).insertEndpoint(endpoint("b-rolled-back"));
        readInside = await webhooksOn(unit).lockEndpoint("b-organization", "b-rolled-back");
        readOutside = await webhooksOn(database.sql).findEndpoint("b-organization", "b-rolled-back");
        throw new Error("rolled back on purpose");
      }),
    ).rejects.toThrow("rolled back on purpose");
    // The unit's own read saw its insert (same transaction); a read from outside saw nothing uncommitted.
    expect(readInside).toMatchObject({ id: "b-rolled-back", secret: "whsec_b-rolled-back", tagIds: null });
    expect(readOutside).toBeNull();
    expect(await webhooksOn(database.sql).findEndpoint("b-organization", "b-rolled-back")).toBeNull();
  });

  it("commits the webhook repository's statements with the rest of the unit", async () => {
    await database.sql.transaction(async (unit) => {
      await unit.run(insertOrganization("c-driver"));
      await webhooksOn(unit).insertEndpoint(endpoint("c-committed"));
      await webhooksOn(unit).updateEndpoint({ ...endpoint("c-committed"), url: "http://127.0.0.1:9/updated" });
    });
    expect(await organizationIds("c-")).toEqual(["c-driver"]);
    expect(await webhooksOn(database.sql).findEndpoint("b-organization", "c-committed")).toMatchObject({
      url: "http://127.0.0.1:9/updated",
      eventTypes: ["reference_created"],
    });
  });

  it("never reports a unit as committed when a statement of it failed and the error was caught", async () => {
    const unit = database.sql.transaction(async (unit) => {
      await unit.run(insertOrganization("e-first"));
      await unit.run(insertOrganization("e-first")).catch(() => "a duplicate key, caught");
      await unit.run(insertOrganization("e-second")).catch(() => "refused after the failure (PostgreSQL)");
    });
    if (kind === "postgres") {
      // The failed statement aborted the transaction: PostgreSQL answers COMMIT with ROLLBACK, and so does the unit.
      await expect(unit).rejects.toThrow("COMMIT answered ROLLBACK");
      expect(await organizationIds("e-")).toEqual([]);
    } else {
      // SQLite undoes only the failed statement: the rest of the unit commits.
      await unit;
      expect(await organizationIds("e-")).toEqual(["e-first", "e-second"]);
    }
  });

  it("keeps a bounded number of statements prepared per connection, and prepares again one it dropped", async () => {
    const cacheName = kind === "postgres" ? "postgres_named" : "sqlite_writer";
    const cache = () => database.sql.statementCaches().find((stats) => stats.cache === cacheName)!;
    const { max } = cache();
    const evictedBefore = cache().evictions;
    // One text per number: a statement each, all on the unit's one connection.
    const sum = (n: number) => Prisma.sql`SELECT CAST(${n} AS INTEGER) + ${Prisma.raw(String(n))} AS "sum"`;
    await database.sql.transaction(async (unit) => {
      for (let n = 0; n < max + 20; n++) expect(await unit.values(sum(n))).toEqual([[2 * n]]);
      if (kind === "postgres") {
        // The backend holds no more than the bound: dropped names were deallocated.
        const [[prepared]] = (await unit.values(Prisma.sql`SELECT count(*) FROM pg_prepared_statements`)) as [[number]];
        expect(prepared).toBeLessThanOrEqual(max);
      }
      // The first text was dropped long ago: it is prepared again, and answers as before.
      expect(await unit.values(sum(0))).toEqual([[0]]);
    });
    // PostgreSQL's figure adds up every connection's (the read lanes' and pools' too): its bound is checked above.
    if (kind === "sqlite") expect(cache().size).toBeLessThanOrEqual(max);
    expect(cache().evictions - evictedBefore).toBeGreaterThanOrEqual(20);
  });
});

describe("the live log on SQLite, while a unit of work is open", () => {
  let testDatabase: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDatabase = await createTestDatabase("sqlite");
    database = await openDatabase(testDatabase.url);
  });
  afterAll(async () => {
    await database?.close();
    await testDatabase?.drop();
  });

  // Live subscriptions read the end of the log outside any unit of work. A position a unit has taken but not
  // committed must stay invisible: after a rollback the next event takes the same number again.
  it("does not show the log positions the unit has taken", async () => {
    const live = new SqlLiveLogStore(database);
    const before = await live.findSettledEnd();
    let during: unknown;
    await expect(
      database.sql.transaction(async (unit) => {
        await unit.run(
          Prisma.sql`UPDATE "lifecycle_log_sequence" SET "last_position" = "last_position" + 5 WHERE "id" = 1`,
        );
        during = await live.findSettledEnd();
        throw new Error("rolled back on purpose");
      }),
    ).rejects.toThrow("rolled back on purpose");
    expect(during).toEqual(before);
    expect(await live.findSettledEnd()).toEqual(before);
  });
});

/*
 * On PostgreSQL, plain reads outside units of work share a few pipelined connections and leave in one write per
 * event-loop turn (src/store/sql/postgres-read-lanes.ts). Many reads sent at once must each get their own answer,
 * a failing one must fail alone, and a lane whose connection is killed must be replaced by the next read.
 */
describe("plain reads on PostgreSQL's shared read connections", () => {
  let testDatabase: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDatabase = await createTestDatabase("postgres");
    database = await openDatabase(testDatabase.url);
  });
  /** Ends the row lock a test holds, should the test have failed before ending it itself. */
  let releaseLock: () => void = () => {};
  afterAll(async () => {
    releaseLock();
    await database?.close();
    await testDatabase?.drop();
  });

  const sendReads = (count: number, failingAt: number) =>
    Array.from({ length: count }, (_, i) =>
      database.sql.values(
        i === failingAt
          ? Prisma.sql`SELECT 1 / (${i}::int - ${i}::int)`
          : Prisma.sql`SELECT ${i}::int * 2, ${`n${i}`}::text`,
      ),
    );

  it("answers each of many reads sent at once with its own rows, and fails only the failing one", async () => {
    const results = await Promise.allSettled(sendReads(120, 37));
    results.forEach((result, i) => {
      if (i === 37) {
        expect(result.status).toBe("rejected");
        expect((result as PromiseRejectedResult).reason).toMatchObject({ code: "22012" }); // division_by_zero
      } else {
        expect(result).toEqual({ status: "fulfilled", value: [[i * 2, `n${i}`]] });
      }
    });
  });

  it("keeps a SELECT that waits for a row lock off the shared connections, so reads go on meanwhile", async () => {
    const id = `locked-${Date.now()}`;
    await database.sql.run(
      Prisma.sql`INSERT INTO "organizations" ("id", "name", "created_at") VALUES (${id}, ${id}, ${new Date()})`,
    );
    const lockRow = Prisma.sql`SELECT "id" FROM "organizations" WHERE "id" = ${id} FOR UPDATE`;
    const released = new Promise<void>((resolve) => (releaseLock = resolve));
    let locked!: () => void;
    const lockTaken = new Promise<void>((resolve) => (locked = resolve));
    const holder = database.sql.transaction(async (unit) => {
      await unit.all(lockRow);
      locked();
      await released;
    });
    await lockTaken;
    const waiting = database.sql.all(lockRow);
    // The reads are answered while the lock is still held: were they queued behind the waiting SELECT, they
    // would never be, and the test would fail on jest's timeout.
    const answers = await Promise.all(sendReads(20, -1));
    releaseLock();
    await holder;
    await waiting;
    expect(answers).toEqual(Array.from({ length: 20 }, (_, i) => [[i * 2, `n${i}`]]));
  });

  it("answers the reads in flight on connections the server kills, by sending them again on new ones", async () => {
    // 20 reads of 50 ms each, queued down the two lanes (PostgreSQL answers a lane's reads one after another):
    // the lanes are killed once the server runs one of them, while most are still waiting on them.
    const admin = new pg.Client({ connectionString: testDatabase.url });
    await admin.connect();
    let answered = 0;
    const reads = Array.from({ length: 20 }, (_, i) =>
      database.sql.values(Prisma.sql`SELECT ${i}::int * 2 FROM pg_sleep(0.05)`).finally(() => answered++),
    );
    try {
      const sleeping = `"datname" = current_database() AND "pid" <> pg_backend_pid() AND "query" LIKE '%pg_sleep%'`;
      await expectEventually(
        async () =>
          (await admin.query(`SELECT 1 FROM "pg_stat_activity" WHERE ${sleeping} AND "state" = 'active'`)).rowCount,
        (running) => expect(running).toBeGreaterThanOrEqual(1),
      );
      const { rowCount } = await admin.query(
        `SELECT pg_terminate_backend("pid") FROM "pg_stat_activity" WHERE ${sleeping}`,
      );
      // Reads were in flight on the killed lanes: not every read had its answer yet.
      expect(answered).toBeLessThan(20);
      expect(rowCount).toBeGreaterThanOrEqual(1);
      const results = await Promise.allSettled(reads);
      expect(results).toEqual(Array.from({ length: 20 }, (_, i) => ({ status: "fulfilled", value: [[i * 2]] })));
    } finally {
      await admin.end();
    }
  });

  it("keeps the reads to a few connections, and replaces one the server kills", async () => {
    await Promise.allSettled(sendReads(200, -1));
    const admin = new pg.Client({ connectionString: testDatabase.url });
    await admin.connect();
    try {
      const backends = async () =>
        (
          await admin.query<{ pid: number }>(
            `SELECT "pid" FROM "pg_stat_activity" WHERE "datname" = current_database() AND "pid" <> pg_backend_pid()`,
          )
        ).rows;
      // Two lanes, plus the connections Prisma and the unit pool may hold open: far fewer than 200.
      expect((await backends()).length).toBeLessThanOrEqual(6);
      const killed = (await backends()).map((backend) => backend.pid);
      await admin.query(`SELECT pg_terminate_backend("pid") FROM unnest($1::int[]) AS "pid"`, [killed]);
      expect(killed.length).toBeGreaterThanOrEqual(1);
      // The killed connections are gone on the server's side; the next reads get new lanes.
      await expectEventually(
        async () => (await backends()).filter((backend) => killed.includes(backend.pid)),
        (left) => expect(left).toEqual([]),
      );
      const results = await Promise.allSettled(sendReads(20, -1));
      expect(results.map((result) => result.status)).toEqual(Array(20).fill("fulfilled"));
    } finally {
      await admin.end();
    }
  });
});

describe("units of work on PostgreSQL's own connections", () => {
  let testDatabase: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDatabase = await createTestDatabase("postgres");
    database = await openDatabase(testDatabase.url);
  });
  afterAll(async () => {
    await database?.close();
    await testDatabase?.drop();
  });

  /** Three units at once, each on a connection of its own: the backends that ran them. */
  const threeUnitsAtOnce = () =>
    Promise.all(
      Array.from({ length: 3 }, () =>
        database.sql.transaction(async (unit) => {
          const [[pid]] = (await unit.values(Prisma.sql`SELECT pg_backend_pid(), pg_sleep(0.05)`)) as [[number]];
          return pid;
        }),
      ),
    );

  // node-postgres closes a pool's connections after 10 s idle; a burst of writes after a quiet spell then waited
  // for new backends (src/store/sql/postgres-executor.ts).
  it("keeps the units' connections open through a quiet spell, so the next burst finds them", async () => {
    const before = await threeUnitsAtOnce();
    expect(new Set(before).size).toBe(3);
    await new Promise((resolve) => setTimeout(resolve, 11_000));
    const after = await threeUnitsAtOnce();
    expect(new Set(after)).toEqual(new Set(before));
  }, 30_000);
});
