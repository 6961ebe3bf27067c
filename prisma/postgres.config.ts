// Prisma CLI configuration for the PostgreSQL schema (see sqlite.config.ts). The adapter is never connected
// by `generate` or `migrate diff`, so the URL only has to be well-formed.
import { PrismaPg } from "@prisma/adapter-pg";
import { defineConfig } from "prisma/config";

export default defineConfig({
  experimental: { adapter: true },
  engine: "js",
  schema: "postgres/schema.prisma",
  adapter: async () =>
    new PrismaPg({ connectionString: process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres" }),
});
