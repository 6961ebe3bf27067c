// Prisma CLI configuration for the PostgreSQL schema (see sqlite.config.ts).
import { defineConfig } from "prisma/config";

export default defineConfig({
  schema: "postgres/schema.prisma",
});
