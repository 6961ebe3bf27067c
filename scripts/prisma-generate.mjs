// Derives the PostgreSQL Prisma schema from the SQLite one (they differ only in provider and output folder)
// and generates both clients. Runs on `npm install`, so a fresh clone always has clients that match the schema.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";

const source = readFileSync("prisma/sqlite/schema.prisma", "utf8");
const derived = source
  .replace('provider = "sqlite"', 'provider = "postgresql"')
  .replace('url      = "file:./unused.db"', 'url      = "postgresql://unused"')
  .replace("__generated__/sqlite", "__generated__/postgres")
  .replace(
    /^\/\/ The source of truth[\s\S]*?never edit that copy\.\n/m,
    "// GENERATED from prisma/sqlite/schema.prisma by `npm run generate:prisma`. Do not edit.\n",
  );
writeFileSync("prisma/postgres/schema.prisma", derived);

for (const provider of ["sqlite", "postgres"]) {
  execFileSync("npx", ["prisma", "generate", "--no-hints", "--config", `prisma/${provider}.config.ts`], {
    stdio: "inherit",
  });
}
