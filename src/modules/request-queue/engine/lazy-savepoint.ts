/**
 * A routine's savepoint, opened just before its first statement that may write: a routine that only
 * reads (a patient match, whose writes the batch makes for it at its commit; a clean-up that keeps the
 * payloads) costs no savepoint round trip, and one that writes rolls back to it alone on failure as before.
 *
 * The batch's transaction runs on one connection, whose statements Kysely sends one at a time; while a
 * routine runs, that connection's `executeQuery` is wrapped to send `SAVEPOINT` first when a statement is
 * not a plain read (anything but a SELECT without WITH and without a locking clause, raw SQL included).
 * A statement that fails before the savepoint is open may have left the transaction unusable (PostgreSQL
 * aborts it), so the routine cannot fail alone: {@link LazySavepoint.failedOutside} tells the engine to
 * roll the batch back and give that routine its savepoint at once next time.
 */
import type { CompiledQuery, DatabaseConnection, QueryResult, RootOperationNode, Transaction } from 'kysely';
import { sql } from 'kysely';
import type { DB } from '../../../db/schema.ts';

export interface LazySavepoint {
  /** The savepoint is open: the routine's writes since then roll back to it. */
  readonly isOpen: boolean;
  /** A statement failed while no savepoint was open: the transaction may be unusable. */
  readonly failedOutside: boolean;
  /** Puts the connection back as it was (after the routine, whatever its outcome). */
  restore(): void;
}

/** Whether `query` may change anything or take a lock (a plain SELECT does neither). */
function mayWrite(query: RootOperationNode): boolean {
  if (query.kind !== 'SelectQueryNode') return true;
  return query.with !== undefined || (query.endModifiers?.length ?? 0) > 0;
}

/**
 * Wraps the connection of `trx` so that the savepoint `name` opens before the first statement that may
 * write (at once when `isEager`). Call `restore` when the routine is over.
 */
export async function openLazySavepoint(
  trx: Transaction<DB>,
  name: string,
  isEager: boolean,
): Promise<LazySavepoint> {
  const connection = await trx.getExecutor().provideConnection(async (c) => c);
  const open = sql`savepoint ${sql.id(name)}`.compile(trx);
  const own = Object.getOwnPropertyDescriptor(connection, 'executeQuery');
  const original = connection.executeQuery.bind(connection);
  const state = { isOpen: false, failedOutside: false };
  const send = <R>(query: CompiledQuery): Promise<QueryResult<R>> => original<R>(query);
  if (isEager) {
    await send(open);
    state.isOpen = true;
  }
  const wrapped: DatabaseConnection['executeQuery'] = async <R>(query: CompiledQuery) => {
    if (!state.isOpen && mayWrite(query.query)) {
      await send(open);
      state.isOpen = true;
    }
    try {
      return await send<R>(query);
    } catch (error) {
      if (!state.isOpen) state.failedOutside = true;
      throw error;
    }
  };
  if (!state.isOpen) connection.executeQuery = wrapped;
  return {
    get isOpen() {
      return state.isOpen;
    },
    get failedOutside() {
      return state.failedOutside;
    },
    restore() {
      if (connection.executeQuery !== wrapped) return;
      if (own !== undefined) Object.defineProperty(connection, 'executeQuery', own);
      else delete (connection as Partial<DatabaseConnection>).executeQuery;
    },
  };
}

/** Rolls `trx` back to the savepoint `name`. */
export async function rollbackToSavepoint(trx: Transaction<DB>, name: string): Promise<void> {
  await sql`rollback to savepoint ${sql.id(name)}`.execute(trx);
}
