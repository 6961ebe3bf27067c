import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { openDatabase, type Database } from "../src/store/database.ts";
import { SqlLiveLogStore } from "../src/store/sql/live-log-store.ts";
import { Prisma } from "../src/store/__generated__/sqlite/client.ts";
import { createTestDatabase, DATABASE_KINDS, type TestDatabase } from "./support/test-server.ts";

/*
 * The executors (src/store/sql/): a unit of work is passed explicitly, and only the statements sent through the
 * unit's executor are part of it. On SQLite the executor shares Prisma's one connection, where a statement sent
 * while a unit is open would join its transaction: a write from outside must wait for the unit and survive its
 * rollback, a read from outside must see only what has committed. Prisma model calls made inside a unit (the
 * webhook repository's, through src/store/prisma/unit-bridge.ts on PostgreSQL) must be part of it.
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

  it("rolls back Prisma's own statements issued inside a unit of work with it", async () => {
    await expect(
      database.sql.transaction(async (unit) => {
        await unit.run(insertOrganization("b-driver"));
        await database.prisma.organization.create({ data: { id: "b-prisma", name: "b", createdAt: new Date() } });
        throw new Error("rolled back on purpose");
      }),
    ).rejects.toThrow("rolled back on purpose");
    expect(await organizationIds("b-")).toEqual([]);
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

  it("commits the statements of both paths together", async () => {
    await database.sql.transaction(async (unit) => {
      await unit.run(insertOrganization("c-driver"));
      await database.prisma.organization.create({ data: { id: "c-prisma", name: "c", createdAt: new Date() } });
    });
    expect(await organizationIds("c-")).toEqual(["c-driver", "c-prisma"]);
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
