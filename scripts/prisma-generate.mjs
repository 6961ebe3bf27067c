// Derives the PostgreSQL Prisma schema from the SQLite one (they differ only in provider and output folder)
// and generates both clients. Runs on `npm install`, so a fresh clone always has clients that match the schema.
import { execFileSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

// `prisma generate` (7.x) looks for the Rust schema engine and downloads it when missing, which fails offline,
// but it never runs the engine to generate a client. Pointing it at a stub that always fails makes generation
// work with no network; commands that do need the engine (`migrate diff`, `migrate deploy`) fail loudly
// instead of half-working. The project applies its migrations with its own runner (src/store/prisma/migration-runner.ts).
const schemaEngineStub = fileURLToPath(new URL("./prisma-schema-engine-stub.sh", import.meta.url));
const environment = {
  ...process.env,
  PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? schemaEngineStub,
};

const source = readFileSync("prisma/sqlite/schema.prisma", "utf8");
const derived = source
  .replace('provider = "sqlite"', 'provider = "postgresql"')
  .replace("__generated__/sqlite", "__generated__/postgres")
  .replace(
    /^\/\/ The source of truth[\s\S]*?never edit that copy\.\n/m,
    "// GENERATED from prisma/sqlite/schema.prisma by `npm run generate:prisma`. Do not edit.\n",
  );
writeFileSync("prisma/postgres/schema.prisma", derived);

for (const provider of ["sqlite", "postgres"]) {
  execFileSync("npx", ["prisma", "generate", "--no-hints", "--config", `prisma/${provider}.config.ts`], {
    stdio: "inherit",
    env: environment,
  });
}
