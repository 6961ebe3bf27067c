import { describe, expect, it } from "@jest/globals";
import { statementNameOf } from "./traced-executor.ts";

describe("a statement's name in its trace span", () => {
  it("is its top-level operation and first table, not a subquery's", () => {
    expect(
      statementNameOf(`SELECT r."id", (SELECT count(*) FROM "lifecycle_events" e) FROM "shipping_references" r`),
    ).toMatchObject({ summary: "SELECT shipping_references", operation: "SELECT", table: "shipping_references" });
    expect(
      statementNameOf(`WITH c AS (SELECT "id" FROM "webhook_endpoints") UPDATE "webhook_deliveries" SET x = ?`),
    ).toMatchObject({ summary: "UPDATE webhook_deliveries" });
    expect(
      statementNameOf(`INSERT INTO "tags" ("id") VALUES ($1) ON CONFLICT ("id") DO UPDATE SET "name" = $2`),
    ).toMatchObject({ summary: "INSERT tags" });
    expect(
      statementNameOf(`DELETE FROM "idempotency_records" WHERE "id" IN (SELECT "id" FROM "x" LIMIT 10)`),
    ).toMatchObject({ summary: "DELETE idempotency_records" });
  });

  it("names no table after a subquery's alias: the top level's next table, or the first anywhere", () => {
    expect(
      statementNameOf(
        `SELECT p."id" FROM (SELECT "id" FROM "reference_tags" LIMIT 50) AS p JOIN "shipping_references" r ON 1=1`,
      ),
    ).toMatchObject({ summary: "SELECT shipping_references" });
    expect(statementNameOf(`SELECT p."id" FROM (SELECT "id" FROM "reference_tags" LIMIT 50) AS p`)).toMatchObject({
      summary: "SELECT reference_tags",
    });
  });

  it("falls back to the first table named anywhere, then to the operation alone", () => {
    expect(statementNameOf(`SELECT (SELECT max("position") FROM "lifecycle_events") AS "last"`).summary).toBe(
      "SELECT lifecycle_events",
    );
    expect(statementNameOf(`SELECT 1`).summary).toBe("SELECT");
  });
});
