-- A cost budget per API key (docs/decisions.md, "Cost budgets"). The key's own maximum and restore rate, when an
-- operator set them (`reftrail key update --budget-maximum N --budget-restore-rate R`); NULL means the server's
-- COST_BUDGET_MAXIMUM / COST_BUDGET_RESTORE_RATE.
ALTER TABLE "api_keys" ADD COLUMN "budget_maximum" DOUBLE PRECISION;
ALTER TABLE "api_keys" ADD COLUMN "budget_restore_rate" DOUBLE PRECISION;

-- The bucket itself, shared by every instance on this database: what was available at `refilled_at` (seconds since
-- the epoch, the database's clock). Each charge is one statement that refills, charges and writes the row under its
-- lock. A table of its own so that the row every request rewrites is not the row authentication reads; fillfactor
-- leaves room for those rewrites to stay on their page (HOT updates). On SQLite the bucket lives in the process
-- that owns the file, and this table stays empty.
CREATE TABLE "api_key_budgets" (
    "api_key_id" TEXT NOT NULL,
    "available" DOUBLE PRECISION NOT NULL,
    "refilled_at" DOUBLE PRECISION NOT NULL,

    CONSTRAINT "api_key_budgets_pkey" PRIMARY KEY ("api_key_id"),
    CONSTRAINT "api_key_budgets_api_key_id_fkey" FOREIGN KEY ("api_key_id") REFERENCES "api_keys"("id") ON DELETE CASCADE ON UPDATE CASCADE
) WITH (fillfactor = 50);
