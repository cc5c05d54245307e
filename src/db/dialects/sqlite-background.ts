/**
 * A SQLite background writer (`Database.openBackgroundWriter`, background-writer.ts): a connection of its
 * own in a worker thread (sqlite-background.worker.js), reached through kysely-generic-sqlite's worker
 * driver (start-up handshake, request ids, errors carried back, pending requests failed when the thread
 * dies). The event loop only posts the rows; the thread waits for the write lock, inserts, commits and
 * fsyncs, and answers once the rows are durable.
 *
 * SQLite has one writer at a time: the server's connection and this one take turns on the write lock.
 * With `takeTurn` (the server's batched writes) a batch is posted only between two of the server
 * connection's transactions, which wait for it, so that it finds the lock free: SQLite's busy wait is
 * not fair: a server connection busy with large uploads would take the lock again and again while this
 * thread sleeps between its tries. Another process's connection is waited for up to the busy timeout;
 * a batch that still finds the lock taken fails with SQLITE_BUSY, and its caller retries it.
 *
 * A thread that has exited (a crash) is replaced by a new one at the next batch.
 */
import { Worker } from 'node:worker_threads';
import type { GenericSqliteWorkerConnection } from 'kysely-generic-sqlite/worker';
import { GenericSqliteWorkerDriver } from 'kysely-generic-sqlite/worker';
import { createNodeWorkerExecutor } from 'kysely-generic-sqlite/worker-helper-node';
import type { BackgroundWriter } from '../background-writer.ts';

/** What the thread is started with. */
interface SqliteBackgroundData extends Record<string, unknown> {
  readonly file: string;
  readonly busyTimeoutMs: number;
}

/** The payload of an `insertRows` request. */
interface InsertRowsRequest {
  readonly table: string;
  readonly columns: readonly string[];
  readonly rows: readonly (readonly unknown[])[];
}

const WORKER_URL = new URL('./sqlite-background.worker.js', import.meta.url);
/** The worker's request name (sqlite-background.worker.js); not imported, which would run the worker. */
const INSERT_ROWS = 'insertRows';

export interface SqliteBackgroundOptions {
  /** How long the thread waits for the write lock before a batch fails with SQLITE_BUSY. */
  readonly busyTimeoutMs?: number;
  /**
   * Runs a batch in its turn among the server connection's writes (`BatchedWriteTransaction.betweenBatches`),
   * so that the thread finds the write lock free rather than losing it to a busy server connection.
   */
  readonly takeTurn?: <T>(batch: () => Promise<T>) => Promise<T>;
}

interface Thread {
  readonly driver: GenericSqliteWorkerDriver<Worker, SqliteBackgroundData>;
  /** Once the thread has opened its connection. */
  readonly connection: Promise<GenericSqliteWorkerConnection>;
  /** Set when the driver starts the thread (at once). */
  readonly state: { worker: Worker | undefined; hasExited: boolean };
}

export function openSqliteBackgroundWriter(
  file: string,
  options: SqliteBackgroundOptions = {},
): BackgroundWriter {
  const data: SqliteBackgroundData = { file, busyTimeoutMs: options.busyTimeoutMs ?? 1000 };
  let current: Thread | undefined;

  const start = (): Thread => {
    const state: Thread['state'] = { worker: undefined, hasExited: false };
    const driver = new GenericSqliteWorkerDriver<Worker, SqliteBackgroundData>(
      createNodeWorkerExecutor({
        data,
        worker: () => {
          const worker = new Worker(WORKER_URL, { name: 'sqlite-background-writer' });
          // Closed by its owner; it keeps the process alive only while a batch is under way.
          worker.unref();
          worker.once('exit', () => {
            state.hasExited = true;
          });
          state.worker = worker;
          return worker;
        },
      }),
    );
    const connection = driver
      .init()
      .then(() => driver.acquireConnection() as Promise<GenericSqliteWorkerConnection>);
    // A failed start is seen by the batch that waits for it; the next batch starts a new thread, so
    // this one must not outlive it.
    connection.catch(() => {
      state.hasExited = true;
      void state.worker?.terminate();
    });
    return { driver, connection, state };
  };

  return {
    async insertRows(table, columns, rows) {
      if (current?.state.hasExited === true) {
        void current.driver.destroy().catch(() => {});
        current = undefined;
      }
      const thread = (current ??= start());
      const request: InsertRowsRequest = { table, columns: columns.map((c) => c.name), rows };
      // Rows on their way to disk keep the process alive (a stopping server waits for them).
      thread.state.worker?.ref();
      try {
        const connection = await thread.connection;
        const insert = () => connection.request(INSERT_ROWS, request);
        await (options.takeTurn === undefined ? insert() : options.takeTurn(insert));
      } finally {
        thread.state.worker?.unref();
      }
    },
    async close() {
      const closing = current;
      current = undefined;
      if (closing === undefined) return;
      await closing.connection.catch(() => {});
      await closing.driver.destroy();
    },
  };
}
