import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/*
 * SQLite's WAL checkpoints, off the event loop. In WAL mode with `synchronous = NORMAL` a commit only appends
 * pages to the WAL; the fsyncs happen at checkpoints, which SQLite by default runs inside the commit that takes
 * the WAL past 1,000 pages. On the one connection the server writes through, that is a synchronous copy of the
 * WAL into the database file plus two fsyncs in the middle of a request, every few dozen writes: under the
 * ingestion bench it was most of COMMIT's cost and every tail above 100 ms (docs/decisions.md, "Data path").
 *
 * So the server's connection never checkpoints (`wal_autocheckpoint = 0`) and a worker thread, with a connection
 * of its own, runs PASSIVE checkpoints on a timer: they copy what readers no longer need and never wait for or
 * block the writer. Once a checkpoint has caught up, SQLite's next writer starts the WAL over from its beginning,
 * so the file does not grow while writes go on. The thread is a few lines of better-sqlite3, hence no library.
 */

const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const connection = new Database(workerData.file);
const checkpoint = connection.prepare("PRAGMA wal_checkpoint(PASSIVE)");
function run() {
  // SQLITE_BUSY (another checkpoint running, from another instance) or a database being removed: the next
  // round, or the next process opening the file, checkpoints what is left.
  try { checkpoint.run(); } catch {}
}
const timer = setInterval(run, workerData.intervalMs);
parentPort.once("message", () => {
  clearInterval(timer);
  run();
  connection.close();
  parentPort.close();
});
`;

export interface SqliteCheckpointer {
  /** Runs a last checkpoint and ends the thread. */
  stop(): Promise<void>;
}

/** Starts the checkpointing thread of the database `file` (whose writers run with `wal_autocheckpoint = 0`). */
export function startSqliteCheckpointer(file: string, intervalMs = 100): SqliteCheckpointer {
  const driver = createRequire(import.meta.url).resolve("better-sqlite3");
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { driver, file, intervalMs } });
  // Never what keeps a process alive; an error in the thread (it cannot open the file) leaves checkpoints to
  // the next process that opens the database, as after a crash.
  worker.unref();
  worker.on("error", () => {});
  const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
  return {
    stop: async () => {
      // Held while it finishes: an unreferenced thread would let the process end with this await unsettled.
      worker.ref();
      worker.postMessage("stop");
      await exited;
    },
  };
}
