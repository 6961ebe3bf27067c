import { randomBytes } from "node:crypto";
import type { DatabaseKind } from "../test/support/test-server.ts";

/* Settings shared by every part of `npm run bench`, read from BENCH_* environment variables. */

/** An integer setting; `1_000_000` style underscores are allowed. */
export function intSetting(name: string, fallback: number, min = 0): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw.replace(/_/g, ""));
  if (!Number.isInteger(value) || value < min) throw new Error(`${name}: "${raw}" is not an integer >= ${min}`);
  return value;
}

/** BENCH_DATABASES, default both: `sqlite,postgres`. */
export function benchDatabases(): DatabaseKind[] {
  return (process.env.BENCH_DATABASES ?? "sqlite,postgres")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      if (s !== "sqlite" && s !== "postgres") throw new Error(`BENCH_DATABASES: unknown database "${s}"`);
      return s;
    });
}

/**
 * The benches run the server with NODE_ENV=production, which refuses to start without a key for webhook signing
 * secrets at rest: each run makes a throwaway one (its databases are dropped at the end).
 */
export const BENCH_WEBHOOK_SECRET_KEY = randomBytes(32).toString("base64");
