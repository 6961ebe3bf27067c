import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { expectStatus, http } from "./support/http.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";
import { eventually, OffsetClock } from "./support/webhooks.ts";

/*
 * Idempotency records hold first responses for 24 hours, and the responses to creating and rotating a webhook
 * endpoint carry its signing secret: no table may hold that secret in plain text, a replay still answers it, and
 * records are deleted once their window has passed — by the server's retention job and by `reftrail prune`.
 */

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "..");
const HOUR_MS = 3_600_000;

/** Every row of every table of the database, as text: what a copy of the database would give away. */
async function everyStoredValue(server: TestServer): Promise<string> {
  const prisma = server.database.prisma;
  const tables =
    server.kind === "sqlite"
      ? await prisma.$queryRawUnsafe<{ name: string }[]>(
          `SELECT "name" FROM "sqlite_master" WHERE "type" = 'table' AND "name" NOT LIKE 'sqlite_%'`,
        )
      : await prisma.$queryRawUnsafe<{ name: string }[]>(
          `SELECT "table_name" AS "name" FROM "information_schema"."tables" WHERE "table_schema" = 'public'`,
        );
  expect(tables.map((table) => table.name)).toContain("idempotency_records");
  const texts: string[] = [];
  for (const { name } of tables) {
    const rows = await prisma.$queryRawUnsafe<unknown[]>(`SELECT * FROM "${name}"`);
    texts.push(JSON.stringify(rows, (_key, value: unknown) => (typeof value === "bigint" ? String(value) : value)));
  }
  return texts.join("\n");
}

describe.each(DATABASE_KINDS)("idempotency records on %s", (kind) => {
  let server: TestServer;
  const clock = new OffsetClock();

  beforeAll(async () => {
    // The retention job off on this instance: pruning is started by hand below.
    server = await startTestServer(kind, { clock, env: { RETENTION_PRUNE_INTERVAL: "0" } });
  }, 60_000);
  afterAll(async () => {
    await server?.close();
  });

  async function recordKeys(): Promise<string[]> {
    const rows = await server.database.prisma.$queryRawUnsafe<{ key: string }[]>(
      `SELECT "key" FROM "idempotency_records" ORDER BY "key"`,
    );
    return rows.map((row) => row.key);
  }

  function createWithKey(key: string) {
    return http(server, "POST", "/v1/webhooks", {
      headers: { "idempotency-key": key },
      body: { url: "https://hooks.example.com/reftrail", description: `created with ${key}` },
    });
  }

  it("stores no signing secret in plain text, and a replay still answers it", async () => {
    const created = await createWithKey(`${kind}-create`);
    expectStatus(created, 201);
    const secret: string = created.body.secret;
    expect(secret).toMatch(/^whsec_/);
    const rotated = await http(server, "POST", `/v1/webhooks/${created.body.id}/rotate-secret`, {
      headers: { "idempotency-key": `${kind}-rotate` },
    });
    expectStatus(rotated, 200);
    const newSecret: string = rotated.body.secret;
    expect(newSecret).toMatch(/^whsec_/);

    const stored = await everyStoredValue(server);
    expect(stored).not.toContain("whsec_");
    expect(stored).not.toContain(secret.slice("whsec_".length));
    expect(stored).not.toContain(newSecret.slice("whsec_".length));
    expect(await recordKeys()).toEqual([`${kind}-create`, `${kind}-rotate`]);

    const replayedCreate = await createWithKey(`${kind}-create`);
    expectStatus(replayedCreate, 201);
    expect(replayedCreate.headers.get("idempotent-replayed")).toBe("true");
    expect(replayedCreate.body).toEqual(created.body);
    const replayedRotate = await http(server, "POST", `/v1/webhooks/${created.body.id}/rotate-secret`, {
      headers: { "idempotency-key": `${kind}-rotate` },
    });
    expectStatus(replayedRotate, 200);
    expect(replayedRotate.headers.get("idempotent-replayed")).toBe("true");
    expect(replayedRotate.body.secret).toBe(newSecret);
  });

  it("deletes records past their 24-hour window with `reftrail prune`, and keeps the others", async () => {
    clock.offsetMs = -25 * HOUR_MS;
    expectStatus(await createWithKey(`${kind}-old`), 201);
    clock.offsetMs = -23 * HOUR_MS;
    expectStatus(await createWithKey(`${kind}-recent`), 201);
    clock.offsetMs = 0;
    expect(await recordKeys()).toContain(`${kind}-old`);

    const { stdout } = await run(process.execPath, ["bin/reftrail.mjs", "prune"], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: server.database.url },
    });
    expect(JSON.parse(stdout)).toMatchObject({ deleted_idempotency_records: 1 });
    const keys = await recordKeys();
    expect(keys).not.toContain(`${kind}-old`);
    expect(keys).toContain(`${kind}-recent`);

    // Its window over, the key is free again: the same request creates a second endpoint.
    const again = await createWithKey(`${kind}-old`);
    expectStatus(again, 201);
    expect(again.headers.get("idempotent-replayed")).toBeNull();
  });

  it("deletes records past their window with the server's retention job", async () => {
    // Records of its own, so that an empty table at the end proves the job deleted them.
    expectStatus(await createWithKey(`${kind}-job-1`), 201);
    expectStatus(await createWithKey(`${kind}-job-2`), 201);
    expect(await recordKeys()).toEqual(expect.arrayContaining([`${kind}-job-1`, `${kind}-job-2`]));
    const later = new OffsetClock();
    later.offsetMs = 25 * HOUR_MS;
    // Another instance whose clock is a day ahead, its job every 100 ms: every record is past its window there.
    const instance = await startInstanceOn(server, { clock: later, env: { RETENTION_PRUNE_INTERVAL: "100ms" } });
    try {
      await eventually(async () => (await recordKeys()).length === 0, 20_000, "the records to be pruned");
    } finally {
      await instance.close();
    }
  });
});
