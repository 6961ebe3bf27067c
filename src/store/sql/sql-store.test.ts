import { describe, expect, it } from "@jest/globals";
import type { ContendedUnitOutcome } from "../../domain/store.ts";
import type { Database } from "../database.ts";
import { ContendedUnitError, isDatabaseUnavailableError } from "../database-availability.ts";
import type { SecretCipher } from "../secret-cipher.ts";
import type { SqlExecutor, TransactionalExecutor } from "./executor.ts";
import { SqlStore } from "./sql-store.ts";
import { UNIT_ATTEMPTS } from "./unit-retry.ts";

/*
 * The unit of work runs a unit again when the database aborted it for a deadlock or a serialization failure, and
 * only then. The races that cause them are tested on PostgreSQL through the API (test/tags.children-race.test.ts);
 * here the driver's answer is given, so that each outcome is seen every time.
 */

/** node-postgres's error for an aborted transaction: a DatabaseError with the SQLSTATE in `code`. */
function databaseError(code: string): Error {
  return Object.assign(new Error(code === "40P01" ? "deadlock detected" : "database error"), { code });
}

/** A store on a driver whose transactions run the work and pass on what it throws (a rollback). */
function storeOnFakeDriver(): { store: SqlStore; transactions: () => number; outcomes: ContendedUnitOutcome[] } {
  let transactions = 0;
  const sql = {
    transaction: async <T>(work: (unit: SqlExecutor) => Promise<T>): Promise<T> => {
      transactions++;
      return work({} as SqlExecutor);
    },
  } as unknown as TransactionalExecutor;
  const store = new SqlStore({ provider: "postgres", sql } as unknown as Database, {} as SecretCipher);
  const outcomes: ContendedUnitOutcome[] = [];
  store.onContendedUnit((outcome) => outcomes.push(outcome));
  return { store, transactions: () => transactions, outcomes };
}

describe("a unit of work the database aborts in favour of another", () => {
  it.each(["40P01", "40001"])(
    "runs again after %s, from the start, and returns what the run that committed returned",
    async (code) => {
      const { store, transactions, outcomes } = storeOnFakeDriver();
      let runs = 0;
      const result = await store.transaction(async () => {
        runs++;
        if (runs < 3) throw databaseError(code);
        return `run ${runs}`;
      });
      expect(result).toBe("run 3");
      expect(transactions()).toBe(3);
      expect(outcomes).toEqual(["retried", "retried"]);
    },
  );

  it(`gives up after ${UNIT_ATTEMPTS} runs with an error answered as a database outage (503, Retry-After)`, async () => {
    const { store, transactions, outcomes } = storeOnFakeDriver();
    const deadlock = databaseError("40P01");
    const failure = await store
      .transaction(async () => {
        throw deadlock;
      })
      .catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ContendedUnitError);
    expect((failure as Error).cause).toBe(deadlock);
    expect(isDatabaseUnavailableError(failure)).toBe(true);
    // The deadlock itself, not given up on, is not an outage.
    expect(isDatabaseUnavailableError(deadlock)).toBe(false);
    expect(transactions()).toBe(UNIT_ATTEMPTS);
    expect(outcomes).toEqual([...Array<ContendedUnitOutcome>(UNIT_ATTEMPTS - 1).fill("retried"), "gave_up"]);
  });

  it("does not run again after any other error, nor a unit inside a unit", async () => {
    const { store, transactions, outcomes } = storeOnFakeDriver();
    const violation = databaseError("23505");
    await expect(
      store.transaction(async () => {
        throw violation;
      }),
    ).rejects.toBe(violation);
    let innerRuns = 0;
    await expect(
      store.transaction((unit) =>
        unit.transaction(async () => {
          innerRuns++;
          throw databaseError("40P01");
        }),
      ),
    ).rejects.toBeInstanceOf(ContendedUnitError);
    // The inner unit is part of the outer one: it runs once per run of the outer.
    expect(innerRuns).toBe(UNIT_ATTEMPTS);
    expect(transactions()).toBe(1 + UNIT_ATTEMPTS);
    expect(outcomes.filter((outcome) => outcome === "gave_up")).toHaveLength(1);
  });
});
