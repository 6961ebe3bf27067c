import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { computeCheckDigit } from "../src/domain/references/container-number.ts";
import type { Outcome } from "./support/drivers.ts";
import { graphqlLifecycleDriver, restLifecycleDriver, type LifecycleDriver } from "./support/lifecycle-drivers.ts";
import { DATABASE_KINDS, startTestServer, type TestServer } from "./support/test-server.ts";

/*
 * The behaviour suite of the lifecycle log and the tracking side (extraction outcomes, updates, children, deactivation and the events
 * log): every scenario runs through REST and through GraphQL, on SQLite and on PostgreSQL.
 */

const SURFACES = [
  ["rest", restLifecycleDriver],
  ["graphql", graphqlLifecycleDriver],
] as const;

function value<T>(outcome: Outcome<T>): T {
  if (!outcome.ok) throw new Error(`expected success, got ${outcome.code} ${JSON.stringify(outcome.body)}`);
  return outcome.value;
}

function failure<T>(outcome: Outcome<T>): { code: string; fields: string[]; body: unknown } {
  if (outcome.ok) throw new Error(`expected failure, got ${JSON.stringify(outcome.value)}`);
  return outcome;
}

let serial = 0;
function containerNumber(): string {
  serial += 1;
  const firstTen = `LCSU${String(serial).padStart(6, "0")}`;
  return `${firstTen}${computeCheckDigit(firstTen)}`;
}

describe.each(DATABASE_KINDS)("lifecycle on %s", (kind) => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer(kind, { env: { EXTRACTION_FAILURE_THRESHOLD: "3" } });
  }, 60_000);
  afterAll(async () => server?.close());

  describe.each(SURFACES)("through %s", (surface, makeDriver) => {
    let api: LifecycleDriver;
    beforeAll(() => {
      api = makeDriver(server);
    });
    const parent = async (tags?: unknown[]) => value(await api.createParent(`${surface}-BOL-${++serial}`, tags));
    const types = async (id: string) => value(await api.listEvents(id)).items.map((event) => event.type);

    it("records extraction outcomes, counts failures and deactivates itself at the threshold", async () => {
      const reference = await parent();
      const succeeded = value(await api.recordExtraction(reference.id, { status: "succeeded" }));
      expect(succeeded).toMatchObject({ lastUpdateStatus: "succeeded", consecutiveFailures: 0, active: true });

      const failed = { status: "failed", error: { code: "TIMEOUT", message: "carrier site timed out" } };
      expect(value(await api.recordExtraction(reference.id, failed)).consecutiveFailures).toBe(1);
      expect(value(await api.recordExtraction(reference.id, failed)).consecutiveFailures).toBe(2);
      const third = value(await api.recordExtraction(reference.id, failed));
      expect(third).toMatchObject({
        consecutiveFailures: 3,
        active: false,
        deactivateReason: "exceeded_extraction_attempt_threshold",
        autoUnsubscribed: true,
      });

      const events = value(await api.listEvents(reference.id)).items;
      expect(events.map((event) => event.type)).toEqual([
        "reference_created",
        "extraction_succeeded",
        "extraction_failed",
        "extraction_failed",
        "extraction_failed",
        "reference_deactivated",
      ]);
      expect(events[4]!.detail).toMatchObject({
        status: "failed",
        error: { code: "TIMEOUT", message: "carrier site timed out" },
        consecutive_failures: 3,
      });
      expect(events[5]!.detail).toMatchObject({
        deactivate_reason: "exceeded_extraction_attempt_threshold",
        auto_unsubscribed: true,
      });
    });

    it("judges extraction outcomes with the same codes and fields on both surfaces", async () => {
      const reference = await parent();
      const cases: [Record<string, unknown>, string[]][] = [
        [{ status: "failed" }, ["error"]],
        [{ status: "failed", error: { code: "", message: "m" } }, ["error.code"]],
        [{ status: "failed", error: { code: "X", message: "" } }, ["error.message"]],
        [{ status: "failed", error: { code: " ", message: "   " } }, ["error.code", "error.message"]],
        [{ status: "succeeded", error: { code: "X", message: "m" } }, ["error"]],
      ];
      for (const [outcome, fields] of cases) {
        const error = failure(await api.recordExtraction(reference.id, outcome));
        expect({ outcome, code: error.code }).toEqual({ outcome, code: "VALIDATION_FAILED" });
        expect(error.fields.filter((field, index, all) => all.indexOf(field) === index)).toEqual(fields);
      }
      // Nothing of a refused outcome is saved.
      expect(await types(reference.id)).toEqual(["reference_created"]);
    });

    it("stores updates and logs the estimates that changed", async () => {
      const reference = await parent();
      value(await api.recordUpdate(reference.id, { estimated_arrival: "2026-12-24T00:00:00Z", vessel: "EVER ACE" }));
      value(await api.recordUpdate(reference.id, { estimated_arrival: "2026-12-24T00:00:00.000Z" }));
      value(await api.recordUpdate(reference.id, { estimated_arrival: "2026-12-26T08:00:00+02:00" }));
      const events = value(await api.listEvents(reference.id)).items;
      expect(events.map((event) => event.type)).toEqual([
        "reference_created",
        "reference_update_created",
        "estimated_arrival_changed",
        "reference_update_created",
        "reference_update_created",
        "estimated_arrival_changed",
      ]);
      expect(events[5]!.detail).toMatchObject({
        previous: "2026-12-24T00:00:00.000Z",
        current: "2026-12-26T06:00:00.000Z",
      });
      expect(events[1]!.detail).toMatchObject({ update: { vessel: "EVER ACE" } });

      const invalid = failure(await api.recordUpdate(reference.id, { estimated_arrival: "next tuesday" }));
      expect(invalid.code).toBe("VALIDATION_FAILED");
      expect(invalid.fields.join()).toMatch(/estimated_?[aA]rrival/);
      expect(await types(reference.id)).toHaveLength(6);
    });

    it("creates each reported container once, as a child with a copy of the parent's tags", async () => {
      const reference = await parent([{ name: `${surface}-parent-tag` }]);
      const [first, second] = [containerNumber(), containerNumber()];
      const children = value(await api.reportChildren(reference.id, [first, second, first]));
      expect(children.map((child) => child.containerId).sort()).toEqual([first, second].sort());
      for (const child of children) {
        expect(child.parentReferenceId).toBe(reference.id);
        expect(child.tags.map((tag) => tag.name)).toEqual([`${surface}-parent-tag`]);
        expect(await types(child.id)).toEqual(["reference_created"]);
      }
      const again = value(await api.reportChildren(reference.id, [second]));
      expect(again.map((child) => child.id)).toEqual(children.filter((c) => c.containerId === second).map((c) => c.id));

      const invalid = failure(await api.reportChildren(reference.id, ["NOT-A-CONTAINER"]));
      expect(invalid.code).toBe("VALIDATION_FAILED");
      expect([...new Set(invalid.fields)]).toEqual(["containerIds.0"]);
      const onContainer = failure(await api.reportChildren(children[0]!.id, [containerNumber()]));
      expect(onContainer.code).toBe("VALIDATION_FAILED");
    });

    it("deactivates with a reason, idempotently, and reactivates only a deactivated reference", async () => {
      const reference = await parent();
      const deactivated = value(await api.deactivate(reference.id, "data_not_found"));
      expect(deactivated).toMatchObject({ active: false, deactivateReason: "data_not_found", autoUnsubscribed: false });
      expect(value(await api.deactivate(reference.id, "carrier_not_found")).deactivateReason).toBe("data_not_found");
      const reactivated = value(await api.reactivate(reference.id));
      expect(reactivated).toMatchObject({ active: true, deactivateReason: null });
      expect(failure(await api.reactivate(reference.id)).code).toBe("CONFLICT");
      expect(failure(await api.deactivate(reference.id, "bored")).code).toMatch(/VALIDATION_FAILED|BAD_USER_INPUT/);
      expect(await types(reference.id)).toEqual([
        "reference_created",
        "reference_deactivated",
        "reference_reactivated",
      ]);
    });

    it("pages the events log with filters and cursors", async () => {
      const reference = await parent();
      for (let index = 0; index < 4; index++) {
        value(await api.recordExtraction(reference.id, { status: "succeeded" }));
        value(await api.recordUpdate(reference.id, { note: index }));
      }
      const all = value(await api.listEvents(reference.id)).items;
      expect(all).toHaveLength(9);

      const paged = [];
      let cursor: string | undefined;
      do {
        const page = value(await api.listEvents(reference.id, { limit: 2, cursor }));
        paged.push(...page.items);
        cursor = page.nextCursor ?? undefined;
      } while (cursor);
      expect(paged.map((event) => event.id)).toEqual(all.map((event) => event.id));

      const filtered = value(await api.listEvents(reference.id, { types: ["extraction_succeeded"], limit: 3 }));
      expect(filtered.items.map((event) => event.type)).toEqual(Array(3).fill("extraction_succeeded"));
      const rest = value(
        await api.listEvents(reference.id, { types: ["extraction_succeeded"], cursor: filtered.nextCursor! }),
      );
      expect(rest.items).toHaveLength(1);
      expect(rest.nextCursor).toBeNull();

      const mismatch = failure(await api.listEvents(reference.id, { cursor: filtered.nextCursor! }));
      expect(mismatch.code).toBe("CURSOR_FILTER_MISMATCH");
      const tampered = failure(await api.listEvents(reference.id, { cursor: `${filtered.nextCursor!}x` }));
      expect(tampered.code).toBe("INVALID_CURSOR");
    });
  });
});
