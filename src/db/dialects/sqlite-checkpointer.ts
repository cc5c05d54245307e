/**
 * Moves SQLite's WAL checkpoints off the event loop. By default the connection that commits runs a
 * checkpoint itself whenever the WAL passes 1000 pages: it copies the pages into the database file and
 * fsyncs both files inside that commit, which stalls every request of the server for milliseconds, several
 * times a second under write load (each answer commits an audit row). Here the writer's automatic
 * checkpoints are off and a worker thread with its own connection checkpoints every `intervalMs`
 * (sqlite-checkpoint.worker.js). The WAL then restarts from its beginning as usual once it is fully
 * copied, so it stays small.
 *
 * The thread starts with the first committed write (`wake()`, called on every commit) and ends itself once
 * no other connection has committed for `idleMs` and the WAL is fully copied, so an idle server does not
 * keep its isolate (about 7 MB); the next commit starts it again.
 *
 * Whenever the thread is not running (not yet started, ended idle, failed or exited), the writer has its
 * automatic checkpoints back: the WAL never grows without bound.
 */
import type { DatabaseSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';

const WORKER_URL = new URL('./sqlite-checkpoint.worker.js', import.meta.url);
/** SQLite's default `wal_autocheckpoint`, restored when the thread is gone. */
const AUTOMATIC_PAGES = 1000;

export interface SqliteCheckpointer {
  /** Starts the thread unless it runs: called after every committed write. Cheap when it runs. */
  wake(): void;
  /** Whether the thread is running now (what tests observe). */
  isRunning(): boolean;
  /** Completed checkpoint rounds of the thread, over all its starts (a metric, and what tests observe). */
  rounds(): number;
  close(): Promise<void>;
}

export interface SqliteCheckpointerOptions {
  /** How often the thread checkpoints. */
  readonly intervalMs?: number;
  /** How long without another connection's commit, the WAL fully copied, before the thread ends. */
  readonly idleMs?: number;
}

export function startSqliteCheckpointer(
  writer: DatabaseSync,
  file: string,
  options: SqliteCheckpointerOptions = {},
): SqliteCheckpointer {
  const workerData = { file, intervalMs: options.intervalMs ?? 100, idleMs: options.idleMs ?? 30_000 };
  let rounds = 0;
  let isClosing = false;
  let worker: Worker | undefined;
  const automaticCheckpoints = () => {
    if (!isClosing && writer.isOpen) writer.exec(`PRAGMA wal_autocheckpoint = ${AUTOMATIC_PAGES}`);
  };
  const start = () => {
    const thread = new Worker(WORKER_URL, { workerData, name: 'sqlite-checkpointer' });
    thread.unref();
    thread.on('message', (message: { kind: string }) => {
      if (message.kind === 'checkpoint') rounds += 1;
    });
    thread.on('error', automaticCheckpoints);
    thread.on('exit', () => {
      if (worker === thread) worker = undefined;
      automaticCheckpoints();
    });
    writer.exec('PRAGMA wal_autocheckpoint = 0');
    worker = thread;
  };
  return {
    wake() {
      if (worker === undefined && !isClosing) start();
    },
    isRunning: () => worker !== undefined,
    rounds: () => rounds,
    async close() {
      isClosing = true;
      const thread = worker;
      if (thread === undefined) return;
      // Keep the process alive until the thread has closed its connection.
      thread.ref();
      const exited = new Promise<void>((resolve) => thread.once('exit', () => resolve()));
      thread.postMessage('close');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
      await thread.terminate();
    },
  };
}
