/**
 * A background writer: appends rows to a table on a database connection of its own, so that work handed
 * to it after an answer (the audit rows of reads) never waits behind, or holds up, the request pool.
 * `Database.openBackgroundWriter()` opens one per caller:
 *
 * - PostgreSQL (and any server database): a Kysely instance over a pool of one connection, opened by the
 *   dialect's own `open` function, and the dialect's `bulkInsert` in a transaction, or alone where it is
 *   one statement ({@link openConnectionWriter}). The pool reconnects by itself after a lost connection.
 * - SQLite: a connection in a worker thread (`dialects/sqlite-background.ts`): the insert, the commit and
 *   the fsync that makes it durable run there, never on the event loop.
 * - An in-memory SQLite database: the database's own write transactions (no other connection sees it).
 *
 * A batch is one transaction: all of its rows are committed, or none. Delivery is at least once: when a
 * connection is lost after the database committed but before it said so, the caller sees a failure and
 * may write the rows again.
 */
import type { AnyKysely, BulkColumn, DialectAdapter } from './dialect.ts';

export interface BackgroundWriter {
  /**
   * Inserts `rows` (each an array of values in `columns` order) into `table` in one transaction on the
   * writer's connection; resolves once they are committed and durable, rejects when nothing was written
   * (or, rarely, when the connection was lost after the commit: see above).
   */
  insertRows(
    table: string,
    columns: readonly BulkColumn[],
    rows: readonly (readonly unknown[])[],
  ): Promise<void>;
  /** Closes the connection (call once nothing is being written). */
  close(): Promise<void>;
}

/** What a writer is made of: a transaction on its connection, the dialect's bulk insert, and a close. */
export interface WriterParts {
  /** Runs `fn` in one transaction on the writer's connection; resolves once the commit is durable. */
  transaction<T>(fn: (trx: AnyKysely) => Promise<T>): Promise<T>;
  readonly bulkInsert: DialectAdapter['bulkInsert'];
  close(): Promise<void>;
}

/** A background writer from its parts: each batch is the dialect's bulk insert in one transaction. */
export function createBackgroundWriter(parts: WriterParts): BackgroundWriter {
  return {
    insertRows: (table, columns, rows) =>
      parts.transaction((trx) => parts.bulkInsert(trx, table, columns, rows)),
    close: () => parts.close(),
  };
}

export interface ConnectionWriterOptions {
  /**
   * The dialect's bulk insert is a single statement whatever the row count (PostgreSQL's `unnest`), and
   * so atomic in autocommit: a batch is then one round trip instead of three (begin, insert, commit).
   */
  readonly isBulkInsertOneStatement?: boolean;
}

/**
 * A background writer over a dialect's connection opened for it alone: for a server database, the
 * dialect's `open` function with a pool of one connection (`openPostgres(url, 1)`).
 */
export function openConnectionWriter(
  connection: {
    /** A Kysely instance over a connection (or a pool of one) that nothing else uses. */
    readonly db: AnyKysely;
    readonly adapter: Pick<DialectAdapter, 'bulkInsert'>;
    close(): Promise<void>;
  },
  options: ConnectionWriterOptions = {},
): BackgroundWriter {
  return createBackgroundWriter({
    transaction: (fn) =>
      options.isBulkInsertOneStatement === true ? fn(connection.db) : connection.db.transaction().execute(fn),
    bulkInsert: connection.adapter.bulkInsert,
    close: () => connection.close(),
  });
}
