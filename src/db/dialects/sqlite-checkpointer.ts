/**
 * Moves SQLite's WAL checkpoints off the event loop. By default the connection that commits runs a
 * checkpoint itself whenever the WAL passes 1000 pages: it copies the pages into the database file and
 * fsyncs both files inside that commit, which stalls every request of the server for milliseconds, several
 * times a second under write load (each answer commits an audit row). Here the writer's automatic
 * checkpoints are off and a worker thread with its own connection checkpoints every `intervalMs`
 * (sqlite-checkpoint.worker.js). The WAL then restarts from its beginning as usual once it is fully
 * copied, so it stays small.
 *
 * If the thread fails or exits, the writer gets its automatic checkpoints back: the WAL never grows
 * without bound.
 */
import type { DatabaseSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';

const WORKER_URL = new URL('./sqlite-checkpoint.worker.js', import.meta.url);
/** SQLite's default `wal_autocheckpoint`, restored when the thread is gone. */
const AUTOMATIC_PAGES = 1000;

export interface SqliteCheckpointer {
  /** Completed checkpoint rounds of the thread (a metric, and what tests observe). */
  rounds(): number;
  close(): Promise<void>;
}

export function startSqliteCheckpointer(
  writer: DatabaseSync,
  file: string,
  intervalMs = 100,
): SqliteCheckpointer {
  writer.exec('PRAGMA wal_autocheckpoint = 0');
  let rounds = 0;
  let isClosing = false;
  const worker = new Worker(WORKER_URL, { workerData: { file, intervalMs } });
  worker.unref();
  const fallBack = () => {
    if (!isClosing && writer.isOpen) writer.exec(`PRAGMA wal_autocheckpoint = ${AUTOMATIC_PAGES}`);
  };
  worker.on('message', (message: { kind: string }) => {
    if (message.kind === 'checkpoint') rounds += 1;
  });
  let hasExited = false;
  worker.on('error', fallBack);
  worker.on('exit', () => {
    hasExited = true;
    fallBack();
  });
  return {
    rounds: () => rounds,
    async close() {
      isClosing = true;
      if (hasExited) return;
      // Keep the process alive until the thread has closed its connection.
      worker.ref();
      const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
      worker.postMessage('close');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
      await worker.terminate();
    },
  };
}
