// Prisma CLI configuration for the SQLite schema. Only `prisma generate` runs here: the application connects
// through a driver adapter (src/store/database.ts) and applies migrations with its own runner
// (src/store/migrations.ts), so no datasource URL is configured.
import { defineConfig } from "prisma/config";

export default defineConfig({
  schema: "sqlite/schema.prisma",
});
