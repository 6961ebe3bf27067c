import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { openDatabase, type Database } from "../src/store/database.ts";
import { Prisma } from "../src/store/sql/sql-template.ts";
import { createTestDatabase, type TestDatabase } from "./support/test-server.ts";

/*
 * On SQLite, pages are read on a thread of their own (src/store/sql/sqlite-read-thread.ts). Through the
 * executor: a page read sent after a commit sees it, rows come back as the event loop's reader gives them, a
 * failing statement rejects with SQLite's code, and closing the database stops the thread without losing a read
 * already sent.
 */
describe("SQLite pages read on a thread of their own", () => {
  let testDatabase: TestDatabase;
  let database: Database;

  beforeAll(async () => {
    testDatabase = await createTestDatabase("sqlite");
    database = await openDatabase(testDatabase.url, { prismaClient: false, sqliteReadThread: true });
    await database.sql.run(Prisma.sql`CREATE TABLE "thread_rows" ("id" INTEGER PRIMARY KEY, "name" TEXT)`);
  });
  afterAll(async () => {
    await database?.close();
    await testDatabase?.drop();
  });

  it("sees every commit made before the read was sent, in the shape the event loop's reader gives", async () => {
    for (let id = 1; id <= 20; id++) {
      await database.sql.run(Prisma.sql`INSERT INTO "thread_rows" ("id", "name") VALUES (${id}, ${`row ${id} ✓`})`);
      const page = database.sql.values(Prisma.sql`SELECT "id", "name" FROM "thread_rows" ORDER BY "id" DESC`, {
        page: true,
      });
      const onLoop = database.sql.values(Prisma.sql`SELECT "id", "name" FROM "thread_rows" ORDER BY "id" DESC`);
      expect(await page).toEqual(await onLoop);
      expect((await page)[0]).toEqual([id, `row ${id} ✓`]);
    }
    await database.sql.transaction(async (unit) => {
      await unit.run(Prisma.sql`DELETE FROM "thread_rows" WHERE "id" > 10`);
    });
    const [count] = await database.sql.values(Prisma.sql`SELECT count(*) FROM "thread_rows"`, { page: true });
    expect(count).toEqual([10]);
  });

  it("rejects a failing statement with SQLite's code and goes on serving", async () => {
    // Fails while it runs (each row's json() of malformed text), not when prepared on the event loop.
    const failing = database.sql.values(Prisma.sql`SELECT json(${"{"}) FROM "thread_rows"`, { page: true });
    await expect(failing).rejects.toMatchObject({ code: "SQLITE_ERROR", message: expect.stringMatching(/JSON/i) });
    const rows = await database.sql.values(Prisma.sql`SELECT count(*) FROM "thread_rows"`, { page: true });
    expect(rows).toEqual([[10]]);
  });

  it("answers the reads sent before it closes, and starts again for a read after", async () => {
    const sent = Array.from({ length: 30 }, () =>
      database.sql.values(Prisma.sql`SELECT count(*) FROM "thread_rows"`, { page: true }),
    );
    const closing = database.sql.close();
    expect(await Promise.all(sent)).toEqual(Array.from({ length: 30 }, () => [[10]]));
    await closing;
    expect(await database.sql.values(Prisma.sql`SELECT count(*) FROM "thread_rows"`, { page: true })).toEqual([[10]]);
  });
});
