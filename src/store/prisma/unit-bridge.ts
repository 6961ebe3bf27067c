import { AsyncLocalStorage } from "node:async_hooks";
import pg from "pg";
import type { OpenUnit, UnitEntry } from "../sql/postgres-executor.ts";

/*
 * A bridge, for one user only: the webhook repository (src/store/prisma-webhook-repository.ts) still makes
 * Prisma model calls inside units of work. On PostgreSQL those calls must run on the unit's connection, in its
 * transaction, or they would wait on another connection for row locks the unit holds. The PostgreSQL executor
 * enters every unit through `enterUnitForPrisma`, and Prisma's pool sends a statement issued inside a unit to
 * that unit's connection. Everything else passes its unit explicitly (src/store/sql/executor.ts); once the
 * webhook repository's model calls are SQL on its executor, this file goes. (On SQLite Prisma and the executor
 * share one connection: a model call issued inside a unit is in its transaction already.)
 */

const currentUnit = new AsyncLocalStorage<OpenUnit>();

/** The PostgreSQL executor's UnitEntry: remembers the open unit for the Prisma calls its work makes. */
export const enterUnitForPrisma: UnitEntry = (unit, work) => currentUnit.run(unit, work);

/** Prisma's pool: a statement issued inside a unit of work runs on the unit's connection, once BEGIN is answered. */
export class UnitRoutedPool extends pg.Pool {
  override query(...args: unknown[]): any {
    const unit = currentUnit.getStore();
    if (unit) {
      // Prisma's adapter awaits what query returns (no callbacks).
      return unit.begun.then(() =>
        (unit.connection.query as (...inner: unknown[]) => unknown).apply(unit.connection, args),
      );
    }
    return (super.query as (...inner: unknown[]) => unknown).apply(this, args);
  }
}
