/**
 * The SQLite checkpointer's thread (see sqlite-checkpointer.ts): its own connection to the database file
 * runs a PASSIVE checkpoint at a fixed interval, so that the copy of WAL pages into the database file and
 * its fsyncs never run on the server's event loop. PASSIVE never waits for readers or the writer; it
 * copies what it can, and the next round copies the rest. It ends itself once no other connection has
 * committed for `idleMs` and the WAL is fully copied.
 *
 * Plain JavaScript, unlike the rest of the service: a thread that loads a `.ts` file starts its own copy
 * of Node's type stripper (about 14 MB), for a file this small.
 */
import { DatabaseSync } from 'node:sqlite';
import { clearInterval, setInterval } from 'node:timers';
import { parentPort, workerData } from 'node:worker_threads';

/** @type {{ file: string, intervalMs: number, idleMs: number }} */
const { file, intervalMs, idleMs } = workerData;
const db = new DatabaseSync(file);
// FULL: the checkpoint syncs the WAL before copying and the database file after (also what NORMAL does).
db.exec('PRAGMA synchronous = FULL');
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
// Changes whenever another connection has committed since this connection last read it.
const dataVersion = db.prepare('PRAGMA data_version');
let lastVersion = -1;
let lastChangeAt = Date.now();

let isClosed = false;
const close = () => {
  if (isClosed) return;
  isClosed = true;
  clearInterval(timer);
  db.close();
  parentPort?.close();
};

const timer = setInterval(() => {
  try {
    /** @type {{ busy: number, log: number, checkpointed: number } | undefined} */
    const row = checkpoint.get();
    const log = row?.log ?? 0;
    const checkpointed = row?.checkpointed ?? 0;
    parentPort?.postMessage({ kind: 'checkpoint', log, checkpointed });
    const version = Number(/** @type {{ data_version: number }} */ (dataVersion.get()).data_version);
    const now = Date.now();
    if (version !== lastVersion) {
      lastVersion = version;
      lastChangeAt = now;
    } else if (now - lastChangeAt >= idleMs && log === checkpointed) {
      // Idle and fully copied: end; the server's next commit starts a new thread.
      close();
    }
  } catch (error) {
    parentPort?.postMessage({
      kind: 'error',
      message: error instanceof Error ? error.message : String(error),
    });
  }
}, intervalMs);

parentPort?.on('message', (message) => {
  if (message === 'close') close();
});
