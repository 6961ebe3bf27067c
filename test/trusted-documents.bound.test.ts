import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { expectStatus, http } from "./support/http.ts";
import Sqlite from "better-sqlite3";
import { openDatabase, sqliteFilePath, type Database } from "../src/store/database.ts";
import { SqlOrganizationRepository } from "../src/store/sql/organization-repository.ts";
import { Prisma } from "../src/store/sql/sql-template.ts";
import {
  createTestDatabase,
  DATABASE_KINDS,
  startInstanceOn,
  startTestServer,
  type TestDatabase,
  type TestServer,
} from "./support/test-server.ts";

/*
 * What registering trusted documents costs an organization (issue 49.3): a registration is priced by its number
 * of documents (it was 1 for 5,000), and an organization holds at most MAX_TRUSTED_DOCUMENTS_PER_ORGANIZATION
 * (nothing bounded it). The bound is decided in the database, under the organization's lock: parallel
 * registrations through two PostgreSQL instances never pass it.
 */

const MAX = 10;
const idOf = (text: string) => `sha256:${createHash("sha256").update(text).digest("hex")}`;

/** A manifest of `count` distinct documents named after `prefix`. */
function manifest(prefix: string, count: number): Record<string, string> {
  const entries = Array.from({ length: count }, (_, index) => `query ${prefix}${index} { __typename }`);
  return Object.fromEntries(entries.map((text) => [idOf(text), text]));
}

async function documentsHeld(server: TestServer, organizationId: string): Promise<number> {
  const rows = await server.database.prisma.$queryRaw<{ count: number | bigint }[]>`
    SELECT COUNT(*) AS "count" FROM "trusted_documents" WHERE "organization_id" = ${organizationId}`;
  return Number(rows[0]!.count);
}

describe.each(DATABASE_KINDS)("trusted documents' price and bound on %s", (kind) => {
  let server: TestServer;

  beforeAll(async () => {
    server = await startTestServer(kind, {
      env: { WEBHOOK_WORKER: "off", MAX_TRUSTED_DOCUMENTS_PER_ORGANIZATION: String(MAX) },
    });
  });

  afterAll(async () => {
    await server?.close();
  });

  it("charges a registration its number of documents", async () => {
    const { organizationId } = await server.newOrganization("priced");
    const issued = await server.app.services.organizations.createApiKey(organizationId, {
      budget: { maximum: 1000, restoreRate: 0.001 },
    });
    const key = { url: server.url, apiKey: issued.key };
    const registered = await http(key, "POST", "/v1/trusted-documents", { body: manifest("Priced", 4) });
    expectStatus(registered, 200);
    expect(registered.headers.get("ratelimit")).toMatch(/^"default";r=996;/);
  });

  it("refuses a registration that would pass the organization's bound, and keeps none of it", async () => {
    const org = await server.newOrganization("bounded");
    const key = { url: server.url, apiKey: org.apiKey };
    expectStatus(await http(key, "POST", "/v1/trusted-documents", { body: manifest("First", 7) }), 200);
    const refused = await http(key, "POST", "/v1/trusted-documents", { body: manifest("Second", 4) });
    expectStatus(refused, 422);
    expect(refused.body.code).toBe("LIMIT_EXCEEDED");
    expect(await documentsHeld(server, org.organizationId)).toBe(7);
    // Documents held already count once: a manifest of the 7 and 3 new fits exactly.
    const fits = await http(key, "POST", "/v1/trusted-documents", {
      body: { ...manifest("First", 7), ...manifest("Third", 3) },
    });
    expectStatus(fits, 200);
    expect(fits.body.registered).toBe(3);
    expect(await documentsHeld(server, org.organizationId)).toBe(MAX);
    // Another organization's registry is its own.
    const other = await server.newOrganization("other registry");
    expectStatus(
      await http({ url: server.url, apiKey: other.apiKey }, "POST", "/v1/trusted-documents", {
        body: manifest("Other", MAX),
      }),
      200,
    );
  });
});

describe("the trusted documents' bound across two instances on postgres", () => {
  let first: TestServer;
  let second: TestServer;

  beforeAll(async () => {
    const env = { WEBHOOK_WORKER: "off", MAX_TRUSTED_DOCUMENTS_PER_ORGANIZATION: String(MAX) };
    first = await startTestServer("postgres", { env });
    second = await startInstanceOn(first, { env });
  });

  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  it("never holds more than the bound, whatever registrations run at once", async () => {
    const org = await first.newOrganization("raced");
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, index) =>
        http({ url: (index % 2 === 0 ? first : second).url, apiKey: org.apiKey }, "POST", "/v1/trusted-documents", {
          body: manifest(`Raced${index}x`, 3),
        }),
      ),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.every((status) => status === 200 || status === 422)).toBe(true);
    const accepted = statuses.filter((status) => status === 200).length;
    // Whole registrations only: 3 of 3 documents each, and no more than the bound allows.
    expect(accepted).toBe(Math.floor(MAX / 3));
    expect(await documentsHeld(first, org.organizationId)).toBe(accepted * 3);
  });
});

// The reftrail command writes beside the server: another process on the same SQLite file. A transaction that counts
// and then writes must hold the write lock from its first statement, or a commit of the other process in between
// makes its write fail at once (SQLITE_BUSY_SNAPSHOT; seen in CI as "reftrail: database is locked" from
// `documents register` while the server ran).
describe("the organization's lock on sqlite, beside another process", () => {
  let testDatabase: TestDatabase;
  let database: Database;
  let other: Sqlite.Database;

  beforeAll(async () => {
    testDatabase = await createTestDatabase("sqlite");
    database = await openDatabase(testDatabase.url);
    other = new Sqlite(sqliteFilePath(testDatabase.url));
    // The other process waits briefly for the lock, then gives up (the reftrail command waits longer).
    other.pragma("busy_timeout = 50");
  });
  afterAll(async () => {
    other?.close();
    await database?.close();
    await testDatabase?.drop();
  });

  it("is the write lock, taken before the count: no other writer commits between the count and the write", async () => {
    const organizationId = "01890000-0000-7000-8000-00000000000a";
    await database.sql.run(Prisma.sql`
      INSERT INTO "organizations" ("id", "name", "created_at") VALUES (${organizationId}, 'locked', ${new Date()})`);
    const renameElsewhere = () =>
      other.prepare(`UPDATE "organizations" SET "name" = 'renamed' WHERE "id" = ?`).run(organizationId);
    await database.sql.transaction(async (unit) => {
      await new SqlOrganizationRepository(database, unit, true).lockOrganization(organizationId);
      await unit.all(Prisma.sql`SELECT COUNT(*) AS "held" FROM "trusted_documents"`);
      // The other process cannot write now: it waits, then is refused...
      expect(renameElsewhere).toThrow(/locked|busy/i);
      // ...and this transaction's write, after its count, goes through.
      await unit.run(Prisma.sql`UPDATE "organizations" SET "name" = 'kept' WHERE "id" = ${organizationId}`);
    });
    const [row] = await database.sql.all<{ name: string }>(
      Prisma.sql`SELECT "name" FROM "organizations" WHERE "id" = ${organizationId}`,
    );
    expect(row!.name).toBe("kept");
    // Once committed, the other process writes again.
    expect(renameElsewhere().changes).toBe(1);
  });
});
