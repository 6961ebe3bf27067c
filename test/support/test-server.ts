import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pg from "pg";
import { buildApp, type App } from "../../src/app.ts";
import { buildServices } from "../../src/build-services.ts";
import { loadConfig, type Config } from "../../src/config.ts";
import type { Services } from "../../src/domain/services.ts";
import type { Clock } from "../../src/domain/shared/clock.ts";
import { openDatabase, type Database } from "../../src/store/database.ts";
import { migrateDatabase } from "../../src/store/prisma/migration-runner.ts";
import type { SpanDestination } from "../../src/tracing/tracing.ts";

export type DatabaseKind = "sqlite" | "postgres";

/**
 * The webhook secret key of every server this test run starts (in process or as a child process), so that
 * instances on one database read each other's secrets and no development key file is written.
 */
export const TEST_WEBHOOK_SECRET_KEY = randomBytes(32).toString("base64");
export const DATABASE_KINDS: readonly DatabaseKind[] = ["sqlite", "postgres"];

const ADMIN_URL = process.env.TEST_DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres";

export interface TestDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

/**
 * A fresh, migrated database: a SQLite file in a temp folder, or `<prefix>_<random>` on PostgreSQL (the
 * benchmarks use the prefix `reftrail_bench`).
 */
export async function createTestDatabase(kind: DatabaseKind, prefix = "reftrail_test"): Promise<TestDatabase> {
  if (kind === "sqlite") {
    const folder = mkdtempSync(join(tmpdir(), `${prefix.replaceAll("_", "-")}-`));
    const url = `file:${join(folder, "test.db")}`;
    await migrateDatabase(url);
    return { url, drop: async () => rmSync(folder, { recursive: true, force: true }) };
  }
  const name = `${prefix}_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  try {
    await admin.connect();
  } catch (error) {
    // Never skip: a suite that needs PostgreSQL fails when it cannot reach it (CI must cover both databases).
    throw new Error(
      `PostgreSQL is required for these tests and unreachable at ${ADMIN_URL}: ${(error as Error).message}`,
    );
  }
  await admin.query(`CREATE DATABASE "${name}"`);
  await admin.end();
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  await migrateDatabase(url.toString());
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: ADMIN_URL });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await client.end();
    },
  };
}

/** The services over a database of their own, without an HTTP server: for tests that drive the domain directly. */
export interface TestServices {
  readonly database: Database;
  readonly services: Services;
  /** Closes the database and drops it. */
  close(): Promise<void>;
}

export async function startTestServices(kind: DatabaseKind, clock?: Clock): Promise<TestServices> {
  const testDatabase = await createTestDatabase(kind);
  const database = await openDatabase(testDatabase.url);
  const config = loadConfig({
    NODE_ENV: "test",
    DATABASE_URL: testDatabase.url,
    WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY,
  });
  return {
    database,
    services: buildServices(config, database, clock),
    close: async () => {
      await database.close();
      await testDatabase.drop();
    },
  };
}

export interface StartOptions {
  readonly env?: Record<string, string>;
  readonly clock?: Clock;
  readonly onQuery?: (sql: string) => void;
  /** Runs on the built app before it listens, e.g. to add a hook that observes every response. */
  readonly beforeListen?: (app: App) => void;
  /** Where the app's trace spans go (tracing on); tracing follows the OTEL_* settings otherwise (off in tests). */
  readonly spans?: SpanDestination;
}

export interface TestServer {
  readonly kind: DatabaseKind;
  /** http://127.0.0.1:<port> */
  readonly url: string;
  readonly apiKey: string;
  readonly organizationId: string;
  readonly app: App;
  readonly database: Database;
  readonly config: Config;
  /** Another organization with its own key, for isolation tests. */
  newOrganization(name?: string): Promise<{ organizationId: string; apiKey: string }>;
  close(): Promise<void>;
}

/** A real server on loopback, on a fresh database, with one organization and its key. */
export async function startTestServer(kind: DatabaseKind, options: StartOptions = {}): Promise<TestServer> {
  const testDatabase = await createTestDatabase(kind);
  const config = loadConfig({
    NODE_ENV: "test",
    LOG_LEVEL: "silent",
    DATABASE_URL: testDatabase.url,
    WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY,
    ...options.env,
  });
  const database = await openDatabase(testDatabase.url, { onQuery: options.onQuery });
  const app = await buildApp({ config, database, clock: options.clock, spans: options.spans });
  options.beforeListen?.(app);
  await app.http.listen({ host: "127.0.0.1", port: 0 });
  const address = app.http.server.address();
  if (!address || typeof address === "string") throw new Error("server did not bind a TCP port");
  const newOrganization = async (name = "test") => {
    const { organization, apiKey } = await app.services.organizations.createOrganization(name);
    return { organizationId: organization.id, apiKey: apiKey.key };
  };
  const first = await newOrganization("primary");
  return {
    kind,
    url: `http://127.0.0.1:${address.port}`,
    apiKey: first.apiKey,
    organizationId: first.organizationId,
    app,
    database,
    config,
    newOrganization,
    close: async () => {
      await app.close();
      await testDatabase.drop();
    },
  };
}

/**
 * Another instance of the app on `server`'s database, as in a deployment of several instances behind one
 * PostgreSQL database (or several processes on one SQLite file). It shares the organization and key of `server`;
 * `close()` stops this instance only (the database belongs to `server`).
 */
export async function startInstanceOn(server: TestServer, options: StartOptions = {}): Promise<TestServer> {
  const url = server.database.url;
  const config = loadConfig({
    NODE_ENV: "test",
    LOG_LEVEL: "silent",
    DATABASE_URL: url,
    WEBHOOK_SECRET_KEY: TEST_WEBHOOK_SECRET_KEY,
    ...options.env,
  });
  const database = await openDatabase(url, { onQuery: options.onQuery });
  const app = await buildApp({ config, database, clock: options.clock });
  await app.http.listen({ host: "127.0.0.1", port: 0 });
  const address = app.http.server.address();
  if (!address || typeof address === "string") throw new Error("server did not bind a TCP port");
  return {
    kind: server.kind,
    url: `http://127.0.0.1:${address.port}`,
    apiKey: server.apiKey,
    organizationId: server.organizationId,
    app,
    database,
    config,
    newOrganization: async (name = "test") => {
      const { organization, apiKey } = await app.services.organizations.createOrganization(name);
      return { organizationId: organization.id, apiKey: apiKey.key };
    },
    close: () => app.close(),
  };
}

/** A clock tests move by hand instead of sleeping. */
export class ManualClock implements Clock {
  constructor(private current = new Date("2026-11-22T00:00:00.000Z")) {}
  now(): Date {
    return new Date(this.current);
  }
  set(to: Date | string): void {
    this.current = new Date(to);
  }
  advance(milliseconds: number): void {
    this.current = new Date(this.current.getTime() + milliseconds);
  }
}
