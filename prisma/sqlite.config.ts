// Prisma CLI configuration for the SQLite schema. The JavaScript engine with a driver adapter lets
// `prisma generate` and `prisma migrate diff` run with no engine binary to download.
import { PrismaBetterSQLite3 } from "@prisma/adapter-better-sqlite3";
import { defineConfig } from "prisma/config";

export default defineConfig({
  experimental: { adapter: true },
  engine: "js",
  schema: "sqlite/schema.prisma",
  adapter: async () => new PrismaBetterSQLite3({ url: "file::memory:" }),
});
