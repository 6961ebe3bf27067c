-- A cost budget per API key (docs/decisions.md, "Cost budgets"). The key's own maximum and restore rate, when an
-- operator set them (`reftrail key update --budget-maximum N --budget-restore-rate R`); NULL means the server's
-- COST_BUDGET_MAXIMUM / COST_BUDGET_RESTORE_RATE.
ALTER TABLE "api_keys" ADD COLUMN "budget_maximum" REAL;
ALTER TABLE "api_keys" ADD COLUMN "budget_restore_rate" REAL;

-- The bucket shared by the instances of a PostgreSQL database (same model on both databases). On SQLite the bucket
-- lives in the process that owns the file, and this table stays empty.
CREATE TABLE "api_key_budgets" (
    "api_key_id" TEXT NOT NULL PRIMARY KEY,
    "available" REAL NOT NULL,
    "refilled_at" REAL NOT NULL,
    CONSTRAINT "api_key_budgets_api_key_id_fkey" FOREIGN KEY ("api_key_id") REFERENCES "api_keys" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
