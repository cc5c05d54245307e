/**
 * The thread of a SQLite background writer (sqlite-background.ts): a connection of its own to the
 * database file. Each `insertRows` request (kysely-generic-sqlite's worker protocol, as a custom request)
 * is one transaction run here from `begin immediate` to the fdatasync of the WAL that makes its commit
 * durable, before the answer goes back. The whole transaction is one request on purpose: the write lock is
 * never held while waiting for the server's thread, which may itself be waiting (synchronously, in its
 * busy timeout) for that lock.
 *
 * The server's connection turns off automatic checkpoints and leaves them to the checkpointer thread;
 * this one does too, so that a commit here never runs a checkpoint.
 *
 * Plain JavaScript, unlike the rest of the service: a thread that loads a `.ts` file starts its own copy
 * of Node's type stripper (about 10 MB of memory). The types of its messages are in sqlite-background.ts.
 */
import { closeSync, fdatasyncSync, openSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { createNodeOnMessageCallback } from 'kysely-generic-sqlite/worker-helper-node';

/** @typedef {{ table: string, columns: string[], rows: unknown[][] }} InsertRowsRequest */

/** The one request this thread takes (sqlite-background.ts sends it by name). */
const INSERT_ROWS = 'insertRows';

/** Under SQLite's bound-parameter limit (32,766), as the server connection's bulk insert. */
const MAX_PARAMETERS = 30_000;

/** @param {string} name */
const quote = (name) => `"${name.replaceAll('"', '""')}"`;

/**
 * A bound value as the server's connection binds it (`toSqliteValue` in sqlite-statements.ts, which this
 * must match; not imported, since that file is TypeScript).
 * @param {unknown} value
 */
function toSqliteValue(value) {
  if (value === undefined || value === null) return null;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'string') return value;
  if (value instanceof Uint8Array) return value;
  if (value instanceof Date) return value.toISOString().slice(0, 19).replace('T', ' ');
  return JSON.stringify(value);
}

createNodeOnMessageCallback(
  ({ file, busyTimeoutMs }) => {
    const connection = openConnection(file, busyTimeoutMs);
    return {
      db: connection,
      query: () => Promise.reject(new Error('this thread takes insertRows requests only')),
      close: () => connection.close(),
    };
  },
  (executor, request) => {
    if (request.type !== INSERT_ROWS) throw new Error(`unknown request: ${request.type}`);
    executor.db.insertRows(/** @type {InsertRowsRequest} */ (request.payload));
    return null;
  },
);

/**
 * Rows of the next INSERT: the largest power of 4 up to what is left and the statement's limit. A batch's
 * rows go in statements of a few fixed sizes, so that the thread prepares a handful of statements per
 * table: one statement per batch size made hundreds of distinct statements, each holding its compiled
 * program in native memory until the thread's garbage collector (rarely run, its heap being small)
 * freed the ones dropped from the cache (the server grew by tens of MB a second under read load).
 * @param {number} left
 * @param {number} limit
 */
function statementRows(left, limit) {
  const most = Math.min(left, limit);
  let size = 1;
  while (size * 4 <= most) size *= 4;
  return size;
}

/**
 * A connection whose `insertRows` runs one transaction (every row or none), durable when it returns.
 * @param {string} file
 * @param {number} busyTimeoutMs
 */
function openConnection(file, busyTimeoutMs) {
  const native = new DatabaseSync(file);
  native.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.floor(busyTimeoutMs))}`);
  native.exec('PRAGMA wal_autocheckpoint = 0');
  native.exec('PRAGMA foreign_keys = ON');
  const journal = /** @type {{ journal_mode?: string } | undefined} */ (
    native.prepare('PRAGMA journal_mode').get()
  );
  // In WAL mode the sync after each commit makes up the commit sync that NORMAL leaves out (as on the
  // server's connection); without WAL, SQLite's own FULL.
  const walFile = journal?.journal_mode === 'wal' ? `${file}-wal` : undefined;
  native.exec(`PRAGMA synchronous = ${walFile === undefined ? 'FULL' : 'NORMAL'}`);
  /** @type {Map<string, import('node:sqlite').StatementSync>} */
  const statements = new Map();
  /** @type {number | undefined} */
  let walFd;

  /** @param {string} text */
  const prepare = (text) => {
    let statement = statements.get(text);
    if (statement === undefined) {
      statement = native.prepare(text);
      if (statements.size >= 100) statements.delete(statements.keys().next().value);
      statements.set(text, statement);
    }
    return statement;
  };

  /** @param {string} path */
  const syncWal = (path) => {
    walFd ??= openSync(path, 'r');
    try {
      fdatasyncSync(walFd);
    } catch (error) {
      // A failed sync proves nothing durable; reopen next time (the error reaches the writer).
      closeSync(walFd);
      walFd = undefined;
      throw error;
    }
  };

  return {
    /** @param {InsertRowsRequest} request */
    insertRows({ table, columns, rows }) {
      if (rows.length === 0) return;
      const perStatement = Math.max(1, Math.floor(MAX_PARAMETERS / columns.length));
      const head = `insert into ${quote(table)} (${columns.map(quote).join(', ')}) values `;
      const tuple = `(${columns.map(() => '?').join(', ')})`;
      native.exec('begin immediate');
      try {
        for (let start = 0; start < rows.length;) {
          const size = statementRows(rows.length - start, perStatement);
          const chunk = rows.slice(start, start + size);
          const statement = prepare(head + Array.from({ length: size }, () => tuple).join(', '));
          statement.run(...chunk.flatMap((row) => row.map(toSqliteValue)));
          start += size;
        }
        native.exec('commit');
      } catch (error) {
        if (native.isTransaction) native.exec('rollback');
        throw error;
      }
      if (walFile !== undefined) syncWal(walFile);
    },
    close() {
      native.close();
      if (walFd !== undefined) closeSync(walFd);
    },
  };
}
