import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { http } from "./support/http.ts";
import { DATABASE_KINDS, startInstanceOn, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * The endpoint limit per organization (50) is decided in the database (issue 49.4): 120 creations at once, spread
 * over two instances on one PostgreSQL database (one instance on SQLite), leave exactly 50 endpoints; every other
 * creation is refused 422 LIMIT_EXCEEDED naming the limit, and none fails otherwise.
 */

const LIMIT = 50;
const CREATIONS = 120;

describe.each(DATABASE_KINDS)("the webhook endpoint limit under concurrent creations on %s", (kind) => {
  let first: TestServer;
  let second: TestServer | undefined;

  beforeAll(async () => {
    first = await startTestServer(kind, { env: { WEBHOOK_WORKER: "off" } });
    if (kind === "postgres") second = await startInstanceOn(first, { env: { WEBHOOK_WORKER: "off" } });
  }, 60_000);
  afterAll(async () => {
    await second?.close();
    await first?.close();
  });

  it(`creates exactly ${LIMIT} of ${CREATIONS} endpoints created at once`, async () => {
    const answers = await Promise.all(
      Array.from({ length: CREATIONS }, (_, n) =>
        http(second && n % 2 === 1 ? second : first, "POST", "/v1/webhooks", {
          body: { url: `http://127.0.0.1:9/hook-${n}` },
        }),
      ),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 201)).toHaveLength(LIMIT);
    expect(statuses.filter((status) => status === 422)).toHaveLength(CREATIONS - LIMIT);
    for (const refused of answers.filter((answer) => answer.status === 422))
      expect(refused.body).toMatchObject({ code: "LIMIT_EXCEEDED", limit: LIMIT });

    const listed = await http(first, "GET", "/v1/webhooks?limit=100");
    expect(listed.status).toBe(200);
    expect(listed.body.data).toHaveLength(LIMIT);
  });
});
