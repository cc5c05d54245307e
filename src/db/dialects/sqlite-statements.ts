/**
 * What every SQLite connection of the service (the server's, the background writer's thread) does the
 * same way with the statements Kysely sends it: take the write lock at `begin`, recognise a statement that
 * leaves a committed change (which must then be made durable), and bind JavaScript values.
 */
import type { StatementSync } from 'node:sqlite';

/**
 * `begin` as `begin immediate`. Kysely opens transactions with a deferred `begin`; a transaction that
 * reads and then writes can then fail at once with "database is locked" when another connection wrote in
 * between (SQLite does not wait on an upgrade). Every transaction here writes, so take the write lock up
 * front, where the busy timeout applies.
 */
export function beginImmediately(sqlText: string): string {
  return /^begin$/i.test(sqlText) ? 'begin immediate' : sqlText;
}

/** Statements that never change the database (Kysely flags its own selects separately). */
const READ_ONLY_STATEMENT = /^\s*(?:select|pragma|explain|begin|rollback|savepoint)\b/i;

/**
 * Starts a statement whose commit (in autocommit) is not flushed before it returns
 * (`commitWithoutFlush`); the executor sees it in the statement's own text, so no other statement can
 * take its place.
 */
export const NO_FLUSH_MARK = '/* commit without flush */';

/**
 * True when `query` has just left a change committed that must be flushed before it returns: it ran
 * outside a transaction (autocommit) or ended one (`commit`, or `release` of an outermost savepoint), it
 * is not a read, and it is not marked {@link NO_FLUSH_MARK}.
 */
export function leavesCommittedChange(query: string, isInTransaction: boolean): boolean {
  return !isInTransaction && !READ_ONLY_STATEMENT.test(query) && !query.startsWith(NO_FLUSH_MARK);
}

export type SqliteValue = null | number | bigint | string | Uint8Array;

/** Bound values from this size up are let go of once their statement has run. */
const LARGE_BINDING_BYTES = 64 * 1024;

/**
 * SQLite keeps a copy of every value bound to a statement until the statement is bound again, and the
 * statement cache keeps statements for reuse: an upload's 100 MB blob would stay in memory until the next
 * upload. After a run with a large value, the statement is bound again with NULLs through `iterate()`,
 * which binds without stepping, so nothing is executed and the copy is freed.
 */
export function releaseLargeBindings(statement: StatementSync, args: readonly SqliteValue[]): void {
  if (!args.some((a) => a instanceof Uint8Array && a.length >= LARGE_BINDING_BYTES)) return;
  statement.iterate(...args.map(() => null)).return?.();
}

/** A bound value as node:sqlite takes it (sqlite-background.worker.js has a copy: keep them alike). */
export function toSqliteValue(value: unknown): SqliteValue {
  if (value === undefined || value === null) return null;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'string') return value;
  if (value instanceof Uint8Array) return value;
  if (value instanceof Date) return value.toISOString().slice(0, 19).replace('T', ' ');
  return JSON.stringify(value);
}
