import type { BudgetLedger, LedgerAnswer } from "../../domain/budgets/budget-ledger.ts";
import { grantedPrefix, type BudgetPolicy } from "../../domain/budgets/cost-budget.ts";
import type { PostgresExecutor } from "./postgres-executor.ts";
import { Prisma } from "./sql-template.ts";

/*
 * The buckets of a PostgreSQL database (table api_key_budgets, migration 0018): one per API key for every instance
 * on the database. Charges are sent together, one statement at a time per instance: the charges that arrive while
 * a statement runs leave in the next one, so that under load a statement carries many requests' charges and a
 * key's row is written once per round trip rather than once per request. The statement locks the keys' rows in
 * key order, refills each to the database's clock, adds the refunds held back since the last statement, grants
 * each key's charges in arrival order while they fit, and writes the rows: one atomic statement, so that two
 * instances never grant a key more than its bucket holds.
 *
 * The statement commits without waiting for its WAL record to reach the disk (`synchronous_commit` off for its
 * own transaction): a crash of the database may forget the last fraction of a second of charges, which only
 * gives the keys back budget they spent in that moment, and every request is spared a disk flush.
 *
 * The statements go through an executor of their own (its own pool on the same database, opened at the first
 * charge): they are the server's bookkeeping, not a request's reads or writes, so they never queue behind a
 * request's statements for a connection nor hold one up, and what counts a request's statements does not see them.
 */

interface Waiter {
  readonly cost: number;
  readonly resolve: (answer: LedgerAnswer) => void;
  readonly reject: (error: unknown) => void;
}

interface KeyCharges {
  policy: BudgetPolicy;
  readonly waiters: Waiter[];
}

interface HeldRefund {
  policy: BudgetPolicy;
  amount: number;
}

/** How long a refund may wait for the key's next charge before a statement of its own gives it back. */
const REFUND_DELAY_MS = 1_000;

export class PostgresBudgetLedger implements BudgetLedger {
  private queued = new Map<string, KeyCharges>();
  private refunds = new Map<string, HeldRefund>();
  private running: Promise<void> | null = null;
  private scheduled = false;
  private refundTimer: NodeJS.Timeout | null = null;
  /** Refunds have waited REFUND_DELAY_MS: the next statement leaves even without charges. */
  private refundsDue = false;

  private executor: Promise<PostgresExecutor> | null = null;

  constructor(private readonly databaseUrl: string) {}

  /** The ledger's own executor; node-postgres is loaded only when a PostgreSQL server charges. */
  private sql(): Promise<PostgresExecutor> {
    this.executor ??= import("./postgres-executor.ts").then(
      ({ PostgresExecutor }) => new PostgresExecutor(this.databaseUrl),
    );
    return this.executor;
  }

  charge(apiKeyId: string, policy: BudgetPolicy, cost: number): Promise<LedgerAnswer> {
    return new Promise((resolve, reject) => {
      let key = this.queued.get(apiKeyId);
      if (!key) this.queued.set(apiKeyId, (key = { policy, waiters: [] }));
      key.policy = policy;
      key.waiters.push({ cost, resolve, reject });
      this.schedule();
    });
  }

  refund(apiKeyId: string, policy: BudgetPolicy, amount: number): void {
    if (amount <= 0) return;
    const held = this.refunds.get(apiKeyId);
    if (held) {
      held.amount += amount;
      held.policy = policy;
    } else {
      this.refunds.set(apiKeyId, { policy, amount });
    }
    if (!this.refundTimer) {
      this.refundTimer = setTimeout(() => {
        this.refundTimer = null;
        if (this.refunds.size === 0) return;
        this.refundsDue = true;
        this.schedule();
      }, REFUND_DELAY_MS);
      this.refundTimer.unref();
    }
  }

  async close(): Promise<void> {
    if (this.refundTimer) clearTimeout(this.refundTimer);
    this.refundTimer = null;
    await this.running;
    if (this.refunds.size > 0 || this.queued.size > 0) await this.send();
    if (this.executor) await (await this.executor).close();
  }

  /** Sends the next statement in the next turn, once the one running has answered. */
  private schedule(): void {
    if (this.scheduled || this.running) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.running = this.send().finally(() => {
        this.running = null;
        if (this.queued.size > 0 || this.refundsDue) this.schedule();
      });
    });
  }

  private async send(): Promise<void> {
    const charges = this.queued;
    const refunds = this.refunds;
    this.refundsDue = false;
    this.queued = new Map();
    this.refunds = new Map();
    try {
      const levels = await this.chargeRows(charges, refunds);
      // Sorted, as the rows are locked: two instances creating the same keys' rows never wait for each other in turn.
      const missing = [...new Set([...charges.keys(), ...refunds.keys()])].filter((id) => !levels.has(id)).sort();
      if (missing.length > 0) {
        // A key's first charge: its row is made full, then charged like the others.
        await this.createRows(missing, charges, refunds);
        const created = await this.chargeRows(pick(charges, missing), pick(refunds, missing));
        for (const [id, level] of created) levels.set(id, level);
      }
      for (const [id, key] of charges) {
        // A key deleted meanwhile has no row: its request fails later on its own, nothing to charge.
        const level = levels.get(id) ?? key.policy.maximum;
        const costs = key.waiters.map((waiter) => waiter.cost);
        const granted = grantedPrefix(costs, level);
        const taken = costs.slice(0, granted).reduce((sum, cost) => sum + cost, 0);
        key.waiters.forEach((waiter, index) => waiter.resolve({ granted: index < granted, available: level - taken }));
      }
    } catch (error) {
      for (const key of charges.values()) for (const waiter of key.waiters) waiter.reject(error);
      // Refunds are owed still: they leave with the next statement.
      for (const [id, held] of refunds) this.refund(id, held.policy, held.amount);
    }
  }

  /** Charges the rows that exist; returns each one's level before its charges (refilled, refunds added). */
  private async chargeRows(
    charges: ReadonlyMap<string, KeyCharges>,
    refunds: ReadonlyMap<string, HeldRefund>,
  ): Promise<Map<string, number>> {
    const ids = [...new Set([...charges.keys(), ...refunds.keys()])].sort();
    if (ids.length === 0) return new Map();
    const policies = ids.map((id) => (charges.get(id) ?? refunds.get(id))!.policy);
    const sumKeys: string[] = [];
    const sums: number[] = [];
    for (const [id, key] of charges) {
      let sum = 0;
      for (const waiter of key.waiters) {
        sum += waiter.cost;
        sumKeys.push(id);
        sums.push(sum);
      }
    }
    const rows = await (
      await this.sql()
    ).all<{ api_key_id: string; level: number }>(Prisma.sql`
      WITH "input" AS (
        SELECT i."api_key_id", i."maximum", i."restore_rate", i."refund",
          set_config('synchronous_commit', 'off', true) AS "commit_mode"
        FROM unnest(CAST(${ids} AS TEXT[]), CAST(${policies.map((p) => p.maximum)} AS FLOAT8[]),
          CAST(${policies.map((p) => p.restoreRate)} AS FLOAT8[]),
          CAST(${ids.map((id) => refunds.get(id)?.amount ?? 0)} AS FLOAT8[]))
          AS i("api_key_id", "maximum", "restore_rate", "refund")
      ),
      "locked" AS (
        SELECT b."api_key_id", b."available", b."refilled_at", i."maximum", i."restore_rate", i."refund",
          EXTRACT(EPOCH FROM clock_timestamp())::FLOAT8 AS "now"
        FROM "api_key_budgets" b JOIN "input" i ON i."api_key_id" = b."api_key_id"
        ORDER BY b."api_key_id"
        FOR UPDATE OF b
      ),
      "refilled" AS (
        SELECT "api_key_id", GREATEST("refilled_at", "now") AS "at",
          LEAST("maximum", "available" + GREATEST(0, "now" - "refilled_at") * "restore_rate" + "refund") AS "level"
        FROM "locked"
      ),
      "charged" AS (
        SELECT r."api_key_id", r."at", r."level",
          COALESCE((SELECT MAX(s."sum") FROM unnest(CAST(${sumKeys} AS TEXT[]), CAST(${sums} AS FLOAT8[]))
            AS s("api_key_id", "sum") WHERE s."api_key_id" = r."api_key_id" AND s."sum" <= r."level"), 0) AS "taken"
        FROM "refilled" r
      ),
      "written" AS (
        UPDATE "api_key_budgets" b SET "available" = c."level" - c."taken", "refilled_at" = c."at"
        FROM "charged" c WHERE b."api_key_id" = c."api_key_id"
        RETURNING b."api_key_id"
      )
      SELECT c."api_key_id", c."level" FROM "charged" c JOIN "written" w ON w."api_key_id" = c."api_key_id"`);
    return new Map(rows.map((row) => [row.api_key_id, Number(row.level)]));
  }

  /** Full buckets for keys that have none yet (a key that no longer exists gets none). */
  private async createRows(
    ids: readonly string[],
    charges: ReadonlyMap<string, KeyCharges>,
    refunds: ReadonlyMap<string, HeldRefund>,
  ): Promise<void> {
    const maxima = ids.map((id) => (charges.get(id) ?? refunds.get(id))!.policy.maximum);
    await (
      await this.sql()
    ).run(Prisma.sql`
      INSERT INTO "api_key_budgets" ("api_key_id", "available", "refilled_at")
      SELECT i."api_key_id", i."maximum", EXTRACT(EPOCH FROM clock_timestamp())::FLOAT8
      FROM unnest(CAST(${[...ids]} AS TEXT[]), CAST(${maxima} AS FLOAT8[])) AS i("api_key_id", "maximum")
      JOIN "api_keys" k ON k."id" = i."api_key_id"
      ON CONFLICT ("api_key_id") DO NOTHING`);
  }
}

function pick<T>(map: ReadonlyMap<string, T>, ids: readonly string[]): Map<string, T> {
  const picked = new Map<string, T>();
  for (const id of ids) {
    const value = map.get(id);
    if (value !== undefined) picked.set(id, value);
  }
  return picked;
}
