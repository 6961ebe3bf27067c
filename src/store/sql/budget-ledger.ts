import type { BudgetLedger, LedgerAnswer } from "../../domain/budgets/budget-ledger.ts";
import { grantedPrefix, refilledLevel, type BudgetPolicy } from "../../domain/budgets/cost-budget.ts";
import type { PostgresExecutor } from "./postgres-executor.ts";
import { Prisma } from "./sql-template.ts";

/*
 * The buckets of a PostgreSQL database (table api_key_budgets, migration 0018): one per API key for every instance
 * on the database. Charges are sent together, one statement at a time per instance: the charges that arrive while
 * a statement runs leave in the next one, so that under load a statement carries many requests' charges and a
 * key's row is written once per round trip rather than once per request. The statement locks the keys' rows in
 * key order, refills each to the database's clock, adds what this instance gives back, grants each key's charges
 * in arrival order while they fit, takes the instance's share for the key out of what is left, and writes the
 * rows: one atomic statement, so that two instances never grant a key more than its bucket holds.
 *
 * The share: a statement that grants all of a key's charges also takes up to SHARE_OF_MAXIMUM of the key's
 * maximum out of its row for this instance, and the key's next charges on this instance are granted from it at
 * once, with no statement: a busy key's requests cost one statement per share spent, not one per event-loop turn.
 * What a request did not use (its refund) goes back to the share. Taken out of the row, a share is spent on this
 * instance only, so it is never granted twice. A charge the share cannot cover, or a key whose policy changed,
 * gives the whole share back in its statement before its charges are decided, so that one instance alone sees its
 * key's bucket exactly; a share unused for SHARE_IDLE_MS goes back to the row with the next statement, or one of its
 * own. Until then the other instances see the key's bucket that much emptier (at most SHARE_OF_MAXIMUM of it per
 * instance). A charge granted from the share answers with the bucket as a statement would find it at that moment
 * (the row as the share's statement left it, refilled since, with the share given back, at most the maximum), so
 * that two identical requests publish the same `throttleStatus` whichever way they were granted.
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

/** Budget taken out of a key's row for this instance (its share, and the refunds given back to it). */
interface Share {
  policy: BudgetPolicy;
  amount: number;
  /** The row's level when the statement that took the share answered; null until one has (refunds alone). */
  rowLevel: number | null;
  /** performance.now() when that statement answered: the row has refilled since. */
  rowAt: number;
  /** performance.now() of the share's last charge or refund. */
  usedAt: number;
}

/** The most of a key's maximum that one instance takes out of its row at a time. */
const SHARE_OF_MAXIMUM = 0.05;

/** How long a share may stay unused before it goes back to the key's row. */
const SHARE_IDLE_MS = 500;

export class PostgresBudgetLedger implements BudgetLedger {
  private queued = new Map<string, KeyCharges>();
  private shares = new Map<string, Share>();
  private running: Promise<void> | null = null;
  private scheduled = false;
  private idleTimer: NodeJS.Timeout | null = null;
  /** Keys whose shares have stayed unused for SHARE_IDLE_MS: the next statement gives them back. */
  private idle = new Set<string>();

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
    const share = this.shares.get(apiKeyId);
    // From the share only while no charge of the key waits for a statement: charges are decided in arrival order.
    if (
      share &&
      share.rowLevel !== null &&
      share.amount >= cost &&
      !this.queued.has(apiKeyId) &&
      samePolicy(share.policy, policy)
    ) {
      const now = performance.now();
      // The bucket as a statement would find it now: the row refilled since, with the share given back to it.
      const level = refilledLevel(share.rowLevel + share.amount, (now - share.rowAt) / 1000, policy);
      share.amount -= cost;
      share.usedAt = now;
      this.idle.delete(apiKeyId);
      return Promise.resolve({ granted: true, available: level - cost });
    }
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
    const share = this.shares.get(apiKeyId);
    if (share) {
      share.amount += amount;
      share.policy = policy;
      share.usedAt = performance.now();
    } else {
      const now = performance.now();
      this.shares.set(apiKeyId, { policy, amount, rowLevel: null, rowAt: now, usedAt: now });
    }
    this.watchIdleShares();
  }

  async close(): Promise<void> {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
    await this.running;
    for (const id of this.shares.keys()) this.idle.add(id);
    if (this.shares.size > 0 || this.queued.size > 0) await this.send();
    if (this.executor) await (await this.executor).close();
  }

  /** Every SHARE_IDLE_MS while shares are held: those unused since the last look go back with the next statement. */
  private watchIdleShares(): void {
    if (this.idleTimer) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      const now = performance.now();
      for (const [id, share] of this.shares) if (now - share.usedAt >= SHARE_IDLE_MS) this.idle.add(id);
      if (this.idle.size > 0) this.schedule();
      if (this.shares.size > this.idle.size) this.watchIdleShares();
    }, SHARE_IDLE_MS);
    this.idleTimer.unref();
  }

  /** Sends the next statement in the next turn, once the one running has answered. */
  private schedule(): void {
    if (this.scheduled || this.running) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.running = this.send().finally(() => {
        this.running = null;
        if (this.queued.size > 0 || this.idle.size > 0) this.schedule();
      });
    });
  }

  private async send(): Promise<void> {
    const charges = this.queued;
    this.queued = new Map();
    // Given back: the shares of the keys charged (their charges are decided on the whole bucket) and the idle ones.
    const returned = new Map<string, Share>();
    for (const id of [...charges.keys(), ...this.idle]) {
      const share = this.shares.get(id);
      if (share) returned.set(id, share);
      this.shares.delete(id);
    }
    this.idle = new Set();
    try {
      const levels = await this.chargeRows(charges, returned);
      // Sorted, as the rows are locked: two instances creating the same keys' rows never wait for each other in turn.
      const missing = [...new Set([...charges.keys(), ...returned.keys()])].filter((id) => !levels.has(id)).sort();
      if (missing.length > 0) {
        // A key's first charge: its row is made full, then charged like the others.
        await this.createRows(missing, charges, returned);
        const created = await this.chargeRows(pick(charges, missing), pick(returned, missing));
        for (const [id, level] of created) levels.set(id, level);
      }
      for (const [id, key] of charges) {
        // A key deleted meanwhile has no row: its request fails later on its own, nothing to charge.
        const { level, taken: shareTaken } = levels.get(id) ?? { level: key.policy.maximum, taken: 0 };
        const costs = key.waiters.map((waiter) => waiter.cost);
        const granted = grantedPrefix(costs, level);
        const taken = costs.slice(0, granted).reduce((sum, cost) => sum + cost, 0);
        key.waiters.forEach((waiter, index) => waiter.resolve({ granted: index < granted, available: level - taken }));
        this.keepShare(id, key.policy, shareTaken, level - taken - shareTaken);
      }
    } catch (error) {
      for (const key of charges.values()) for (const waiter of key.waiters) waiter.reject(error);
      // Shares are owed to the rows still: they leave with the next statement.
      for (const [id, share] of returned) this.refund(id, share.policy, share.amount);
    }
  }

  /** The share a statement took for `id` (with what was refunded to the key while it ran). */
  private keepShare(id: string, policy: BudgetPolicy, amount: number, rowLevel: number): void {
    const share = this.shares.get(id);
    const now = performance.now();
    if (share) {
      share.amount += amount;
      share.rowLevel = rowLevel;
      share.rowAt = now;
    } else if (amount > 0) {
      this.shares.set(id, { policy, amount, rowLevel, rowAt: now, usedAt: now });
    } else {
      return;
    }
    this.watchIdleShares();
  }

  /**
   * Charges the rows that exist and takes the charged keys' shares from what is left; returns each row's level
   * before its charges (refilled, what was given back added) and the share taken.
   */
  private async chargeRows(
    charges: ReadonlyMap<string, KeyCharges>,
    returned: ReadonlyMap<string, Share>,
  ): Promise<Map<string, { level: number; taken: number }>> {
    const ids = [...new Set([...charges.keys(), ...returned.keys()])].sort();
    if (ids.length === 0) return new Map();
    const policies = ids.map((id) => (charges.get(id) ?? returned.get(id))!.policy);
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
    ).all<{ api_key_id: string; level: number; share: number }>(Prisma.sql`
      WITH "input" AS (
        SELECT i."api_key_id", i."maximum", i."restore_rate", i."refund", i."share",
          set_config('synchronous_commit', 'off', true) AS "commit_mode"
        FROM unnest(CAST(${ids} AS TEXT[]), CAST(${policies.map((p) => p.maximum)} AS FLOAT8[]),
          CAST(${policies.map((p) => p.restoreRate)} AS FLOAT8[]),
          CAST(${ids.map((id) => returned.get(id)?.amount ?? 0)} AS FLOAT8[]),
          CAST(${ids.map((id, index) => (charges.has(id) ? policies[index]!.maximum * SHARE_OF_MAXIMUM : 0))} AS FLOAT8[]))
          AS i("api_key_id", "maximum", "restore_rate", "refund", "share")
      ),
      "locked" AS (
        SELECT b."api_key_id", b."available", b."refilled_at", i."maximum", i."restore_rate", i."refund", i."share",
          EXTRACT(EPOCH FROM clock_timestamp())::FLOAT8 AS "now"
        FROM "api_key_budgets" b JOIN "input" i ON i."api_key_id" = b."api_key_id"
        ORDER BY b."api_key_id"
        FOR UPDATE OF b
      ),
      "refilled" AS (
        SELECT "api_key_id", "share", GREATEST("refilled_at", "now") AS "at",
          LEAST("maximum", "available" + GREATEST(0, "now" - "refilled_at") * "restore_rate" + "refund") AS "level"
        FROM "locked"
      ),
      "sums" AS (
        SELECT * FROM unnest(CAST(${sumKeys} AS TEXT[]), CAST(${sums} AS FLOAT8[])) AS s("api_key_id", "sum")
      ),
      "charged" AS (
        SELECT r."api_key_id", r."at", r."level", r."share",
          COALESCE((SELECT MAX(s."sum") FROM "sums" s
            WHERE s."api_key_id" = r."api_key_id" AND s."sum" <= r."level"), 0) AS "taken",
          COALESCE((SELECT MAX(s."sum") FROM "sums" s WHERE s."api_key_id" = r."api_key_id"), 0) AS "asked"
        FROM "refilled" r
      ),
      "shared" AS (
        SELECT "api_key_id", "at", "level", "taken",
          CASE WHEN "taken" < "asked" THEN 0 ELSE LEAST("share", "level" - "taken") END AS "share"
        FROM "charged"
      ),
      "written" AS (
        UPDATE "api_key_budgets" b SET "available" = c."level" - c."taken" - c."share", "refilled_at" = c."at"
        FROM "shared" c WHERE b."api_key_id" = c."api_key_id"
        RETURNING b."api_key_id"
      )
      SELECT c."api_key_id", c."level", c."share"
      FROM "shared" c JOIN "written" w ON w."api_key_id" = c."api_key_id"`);
    return new Map(rows.map((row) => [row.api_key_id, { level: Number(row.level), taken: Number(row.share) }]));
  }

  /** Full buckets for keys that have none yet (a key that no longer exists gets none). */
  private async createRows(
    ids: readonly string[],
    charges: ReadonlyMap<string, KeyCharges>,
    returned: ReadonlyMap<string, Share>,
  ): Promise<void> {
    const maxima = ids.map((id) => (charges.get(id) ?? returned.get(id))!.policy.maximum);
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

function samePolicy(a: BudgetPolicy, b: BudgetPolicy): boolean {
  return a.maximum === b.maximum && a.restoreRate === b.restoreRate;
}
