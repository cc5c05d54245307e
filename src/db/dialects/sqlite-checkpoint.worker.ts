/**
 * The SQLite checkpointer's thread (see sqlite-checkpointer.ts): its own connection to the database file
 * runs a PASSIVE checkpoint at a fixed interval, so that the copy of WAL pages into the database file and
 * its fsyncs never run on the server's event loop. PASSIVE never waits for readers or the writer; it
 * copies what it can, and the next round copies the rest.
 */
import { DatabaseSync } from 'node:sqlite';
import { parentPort, workerData } from 'node:worker_threads';

interface CheckpointerData {
  readonly file: string;
  readonly intervalMs: number;
}

const { file, intervalMs } = workerData as CheckpointerData;
const db = new DatabaseSync(file);
// FULL: the checkpoint syncs the WAL before copying and the database file after (also what NORMAL does).
db.exec('PRAGMA synchronous = FULL');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');

const timer = setInterval(() => {
  try {
    const row = checkpoint.get() as { busy: number; log: number; checkpointed: number } | undefined;
    parentPort?.postMessage({ kind: 'checkpoint', log: row?.log ?? 0, checkpointed: row?.checkpointed ?? 0 });
  } catch (error) {
    parentPort?.postMessage({
      kind: 'error',
      message: error instanceof Error ? error.message : String(error),
    });
  }
}, intervalMs);

parentPort?.on('message', (message: unknown) => {
  if (message !== 'close') return;
  clearInterval(timer);
  db.close();
  parentPort?.close();
});
