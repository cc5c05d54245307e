/**
 * Short write transactions for request handlers, durable when they resolve.
 *
 * PostgreSQL: a plain transaction; the server already commits concurrent transactions of many
 * connections with one WAL flush (group commit).
 *
 * SQLite has one connection, so writes run one after the other and each commit needs an fsync of the
 * WAL. Writes that arrive while one is running are therefore batched: one transaction, one savepoint per
 * write (a failing write rolls back to its savepoint and rejects alone), one commit and one fsync for the
 * batch. A write's promise settles only after the commit is flushed to disk, so a 200 sent after it is
 * backed by a durable database. The flush (`SqliteDurability.flush`, an fdatasync of the WAL off the
 * event loop) runs after the connection is released: reads and the next batch's writes go on meanwhile,
 * and a flush covers every commit before it. At low load a batch holds a single write and nothing waits.
 */
import type { Kysely, Transaction } from 'kysely';
import type { DB } from './schema.ts';

export type WriteFn<T> = (trx: Transaction<DB>) => Promise<T>;

export type WriteTransaction = <T>(fn: WriteFn<T>) => Promise<T>;

interface PendingWrite {
  readonly fn: WriteFn<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/** Work run between two batches, with no transaction open on the connection (see `betweenBatches`). */
interface PendingTurn {
  readonly turn: () => Promise<unknown>;
  readonly resolve: (value: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * The batched writes of a SQLite connection, and turns for another connection to the same file: `fn`
 * runs as soon as the batch under way has committed, before the writes still waiting, so that
 * a writer on another connection (the read audit sink's thread) gets the write lock in its turn instead of
 * retrying against a connection that takes it again and again (SQLite's busy wait is not fair).
 */
export interface BatchedWriteTransaction extends WriteTransaction {
  betweenBatches<T>(this: void, fn: () => Promise<T>): Promise<T>;
}

const MAX_BATCH = 64;
/**
 * A batch takes no further write once it has run this long: the writes left wait for the next batch, so
 * that a turn of another connection (`betweenBatches`) never waits behind many large writes (uploads of
 * tens of megabytes take a fraction of a second each).
 */
const BATCH_BUDGET_MS = 100;

/** A plain transaction per write (PostgreSQL). */
export function createPlainWriteTransaction(db: Kysely<DB>): WriteTransaction {
  return (fn) => db.transaction().execute(fn);
}

/** How a batch's commit is made durable after the connection is released (SQLite in WAL mode). */
export interface SqliteDurability {
  /** Tells the connection not to flush after its next statement (the batch's commit): the batch will. */
  deferFlushOfNextStatement(isDeferred: boolean): void;
  /** Resolves once every commit so far is on stable storage. */
  flush(): Promise<void>;
}

/**
 * Writes batched into shared transactions with a savepoint each (SQLite). Without `durability`, each
 * commit is durable when it returns (the connection flushes it, or SQLite runs with FULL).
 */
export function createBatchedWriteTransaction(
  db: Kysely<DB>,
  durability?: SqliteDurability,
): BatchedWriteTransaction {
  let pending: (PendingWrite | PendingTurn)[] = [];
  let isDraining = false;

  /** Runs writes of `writes` in one transaction; answers those left out by the time budget. */
  async function runBatch(writes: readonly PendingWrite[]): Promise<PendingWrite[]> {
    const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    const batch: PendingWrite[] = [];
    let trx;
    try {
      trx = await db.startTransaction().execute();
    } catch (error) {
      for (const write of writes) write.reject(error);
      return [];
    }
    const startedAt = performance.now();
    try {
      for (const write of writes) {
        if (batch.length > 0 && performance.now() - startedAt > BATCH_BUDGET_MS) break;
        batch.push(write);
        const inSavepoint = await trx.savepoint('write').execute();
        try {
          const value = await write.fn(inSavepoint);
          await inSavepoint.releaseSavepoint('write').execute();
          outcomes.push({ ok: true, value });
        } catch (error) {
          await inSavepoint.rollbackToSavepoint('write').execute();
          await inSavepoint.releaseSavepoint('write').execute();
          outcomes.push({ ok: false, error });
        }
      }
      durability?.deferFlushOfNextStatement(true);
      try {
        await trx.commit().execute();
      } finally {
        durability?.deferFlushOfNextStatement(false);
      }
    } catch (error) {
      // The batch itself failed (commit, savepoint bookkeeping): nothing of it is durable.
      await trx
        .rollback()
        .execute()
        .catch(() => {});
      for (const write of batch) write.reject(error);
      return writes.slice(batch.length);
    }
    const settle = () =>
      batch.forEach((write, index) => {
        const outcome = outcomes[index]!;
        if (outcome.ok) write.resolve(outcome.value);
        else write.reject(outcome.error);
      });
    if (durability === undefined) {
      settle();
      return writes.slice(batch.length);
    }
    // Not awaited: the next batch may commit while this one's flush runs (the one after covers both).
    // A failed flush proves nothing durable: every write of the batch is refused.
    durability.flush().then(settle, (error: unknown) => {
      for (const write of batch) write.reject(error);
    });
    return writes.slice(batch.length);
  }

  async function drain(): Promise<void> {
    isDraining = true;
    try {
      while (pending.length > 0) {
        // A turn goes before the writes still waiting, even those queued before it: it is one short
        // transaction, and a batch's writes may be large.
        const turnAt = pending.findIndex((entry) => 'turn' in entry);
        if (turnAt !== -1) {
          const entry = pending[turnAt] as PendingTurn;
          pending = [...pending.slice(0, turnAt), ...pending.slice(turnAt + 1)];
          await entry.turn().then(entry.resolve, entry.reject);
          continue;
        }
        const batch = pending.slice(0, MAX_BATCH);
        pending = pending.slice(batch.length);
        const left = await runBatch(batch as PendingWrite[]);
        pending = [...left, ...pending];
      }
    } finally {
      isDraining = false;
    }
  }

  const enqueue = <T>(work: { fn: WriteFn<T> } | { turn: () => Promise<T> }) =>
    new Promise<T>((resolve, reject) => {
      pending.push({ ...work, resolve: resolve as (value: unknown) => void, reject });
      if (!isDraining) void drain();
    });
  return Object.assign(<T>(fn: WriteFn<T>) => enqueue<T>({ fn }), {
    betweenBatches: <T>(turn: () => Promise<T>) => enqueue<T>({ turn }),
  });
}
