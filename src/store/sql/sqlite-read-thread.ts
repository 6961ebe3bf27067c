import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";
import { SQLITE_STATEMENTS_PER_CONNECTION, type StatementCacheStats } from "./statement-cache.ts";

/*
 * SQLite reads outside units of work, run on a thread of their own (docs/decisions.md, "SQLite reads on a thread
 * of their own"). better-sqlite3 is synchronous: on the event loop's thread, every statement of every API read
 * held that thread — a page of references spent a third of the server's CPU inside SQLite — while the
 * machine's other core served only the load's clients. On this thread the statements run beside the event
 * loop, which meanwhile parses, authenticates and writes other responses. Writes and units of work stay on the
 * event loop's connection (one writer: see sqlite-executor.ts).
 *
 * The thread holds one read-only connection, as the reader on the event loop did: in WAL mode each statement
 * sees what had committed when it started, so a read sent after a commit sees that commit. Statements run one at
 * a time, in the order sent.
 *
 * The thread's code is plain JavaScript given as text (`eval`): a worker's entry file would need the TypeScript
 * loader under tests and a build step of its own, and the code is this short. The driver and lru-cache are
 * loaded by the paths resolved here, whatever the process's working directory.
 *
 * Its prepared statements are bounded like the executor's (statement-cache.ts); every answer tells the cache's
 * size and evictions, for /metrics.
 */
const READER_CODE = `
const { parentPort, workerData } = require("node:worker_threads");
const Sqlite = require(workerData.driver);
const { LRUCache } = require(workerData.lruCache);
const connection = new Sqlite(workerData.file, { readonly: true, fileMustExist: true });
// A reader waits only while SQLite recovers or resets the WAL, never for writers.
connection.pragma("busy_timeout = 5000");
let evictions = 0;
const statements = new LRUCache({
  max: workerData.maxStatements,
  dispose: (statement, sql, reason) => {
    if (reason === "evict") evictions++;
  },
});
const cache = () => ({ size: statements.size, evictions });
parentPort.on("message", (message) => {
  if (message.close) {
    connection.close();
    parentPort.close();
    return;
  }
  try {
    let statement = statements.get(message.sql);
    if (statement === undefined) {
      statement = connection.prepare(message.sql);
      statements.set(message.sql, statement);
    }
    const rows = statement.raw(message.asArrays).all(...message.values);
    parentPort.postMessage({ id: message.id, rows, cache: cache() });
  } catch (error) {
    const failure = { message: String(error && error.message), code: error && error.code };
    parentPort.postMessage({ id: message.id, error: failure, cache: cache() });
  }
});
`;

/** A reply of the thread: the rows or the error of read `id`, and its statement cache's figures then. */
interface Reply {
  readonly id: number;
  readonly rows?: unknown[];
  readonly error?: { message: string; code?: string };
  readonly cache: { readonly size: number; readonly evictions: number };
}

interface Pending {
  resolve(rows: unknown[]): void;
  reject(error: Error): void;
}

/** A read that failed on the thread: the driver's message and its SQLite code (`SQLITE_BUSY`, …). */
export class SqliteReadError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
    this.name = "SqliteError";
  }
}

export class SqliteReadThread {
  private worker: Worker | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  /** The thread's statement cache as its last answer told it (threads restarted before included in evictions). */
  private cache = { size: 0, evictions: 0 };
  private evictionsBefore = 0;

  constructor(private readonly file: string) {}

  /** Runs a read statement on the thread: rows as objects, or as arrays of values with `asArrays`. */
  read(sql: string, values: readonly unknown[], asArrays: boolean): Promise<unknown[]> {
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    // The thread keeps the process alive only while a read waits for it.
    if (this.pending.size === 0) worker.ref();
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, sql, values, asArrays });
    });
  }

  statementCache(): StatementCacheStats {
    return {
      cache: "sqlite_read_thread",
      size: this.worker ? this.cache.size : 0,
      max: SQLITE_STATEMENTS_PER_CONNECTION,
      evictions: this.evictionsBefore + this.cache.evictions,
    };
  }

  /** Stops the thread once the reads sent have been answered; later reads start it again. */
  async close(): Promise<void> {
    const worker = this.worker;
    if (!worker) return;
    this.worker = null;
    const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
    worker.ref(); // until it has exited: nothing else may be keeping the process alive
    worker.postMessage({ close: true });
    await exited;
  }

  private start(): Worker {
    const require = createRequire(import.meta.url);
    const workerData = {
      driver: require.resolve("better-sqlite3"),
      lruCache: require.resolve("lru-cache"),
      file: this.file,
      maxStatements: SQLITE_STATEMENTS_PER_CONNECTION,
    };
    const worker = new Worker(READER_CODE, { eval: true, workerData });
    this.evictionsBefore += this.cache.evictions;
    this.cache = { size: 0, evictions: 0 };
    worker.on("message", (message: Reply) => {
      this.cache = message.cache;
      const waiting = this.pending.get(message.id);
      if (!waiting) return;
      this.pending.delete(message.id);
      if (this.pending.size === 0) worker.unref();
      if (message.error) waiting.reject(new SqliteReadError(message.error.message, message.error.code));
      else waiting.resolve(message.rows!);
    });
    const failAll = (error: Error) => {
      if (this.worker === worker) this.worker = null;
      for (const waiting of this.pending.values()) waiting.reject(error);
      this.pending.clear();
    };
    worker.on("error", failAll);
    worker.on("exit", (code) => failAll(new Error(`the SQLite read thread exited with code ${code}`)));
    this.worker = worker;
    return worker;
  }
}
