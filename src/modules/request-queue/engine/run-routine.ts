/**
 * One attempt of a claimed routine: its `validate` and `prepare` (before the write transaction, outside
 * any transaction), then `run` in a savepoint of the batch's transaction (opened
 * before its first write), with the routine's timeout. A failure rolls the savepoint back, so none of the
 * routine's writes remain; a timeout fails the whole batch (see {@link RoutineTimeoutError}).
 */
import type { ControlledTransaction } from 'kysely';
import type { DB } from '../../../db/schema.ts';
import type { Attempt, AttemptEffects } from './attempts.ts';
import { outcomeOf } from './attempts.ts';
import type { ClaimedRoutine } from './claim.queries.ts';
import type { PrepareContext, RoutineDefinition } from './routine-catalog.ts';
import { PermanentRoutineError } from './routine-catalog.ts';
import type { BatchLocks } from './run-context.ts';
import { RoutineLockBusyError, createPrepareContext, createRunContext } from './run-context.ts';
import { openLazySavepoint, rollbackToSavepoint } from './lazy-savepoint.ts';
import type { EngineRuntime } from './runtime.ts';

/** What `prepare` gave, run before the write transaction. */
export interface Prepared {
  readonly prepared: unknown;
  readonly failure: unknown;
}

/**
 * A routine ran past its timeout. Its code may still be running and could still issue queries, so the
 * whole transaction is rolled back (not just the routine's savepoint): later queries on it then fail
 * instead of landing in someone else's commit.
 */
export class RoutineTimeoutError extends Error {
  readonly claimed: ClaimedRoutine | undefined;
  readonly logLines: readonly string[];
  constructor(timeoutMs: number, claimed?: ClaimedRoutine, logLines: readonly string[] = []) {
    super(`Routine timed out after ${timeoutMs} ms`);
    this.name = 'RoutineTimeoutError';
    this.claimed = claimed;
    this.logLines = logLines;
  }
}

/**
 * `ctx.yieldTurn` of an attempt that started at `startedAtMs` by the engine's clock: a turn of the event
 * loop (`setImmediate`, after which due timers and I/O run: the routine's own timeout timer, HTTP
 * requests), then a {@link RoutineTimeoutError} once `timeoutMs` have passed, so that work done in
 * chunks stops at its limit even where every query runs on the main thread.
 */
function createYieldTurn(rt: EngineRuntime, timeoutMs: number, startedAtMs: number): () => Promise<void> {
  return async () => {
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (rt.now().getTime() - startedAtMs >= timeoutMs) throw new RoutineTimeoutError(timeoutMs);
  };
}

function withTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RoutineTimeoutError(timeoutMs)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function prepareAndValidate(definition: RoutineDefinition, context: PrepareContext): Promise<unknown> {
  await definition.validate?.(context);
  return definition.prepare === undefined ? undefined : definition.prepare(context);
}

/** Runs `validate` and `prepare` of `routine` before the write transaction, on the database's pool. */
export async function prepareAhead(
  rt: EngineRuntime,
  routine: ClaimedRoutine,
  logLines: string[],
): Promise<Prepared> {
  const definition = rt.catalog.get(routine.routine_name);
  if (definition === undefined) return { prepared: undefined, failure: undefined };
  rt.activeCount += 1;
  try {
    const prepared = await withTimeout(
      prepareAndValidate(definition, createPrepareContext(rt, routine, rt.db, logLines)),
      definition.timeoutMs,
    );
    return { prepared, failure: undefined };
  } catch (error) {
    return { prepared: undefined, failure: error };
  } finally {
    rt.activeCount -= 1;
  }
}

/**
 * Runs `claimed` inside `trx` (held, not committed here): a savepoint before its first write
 * (`lazy-savepoint.ts`), the routine with what its `prepare` gave (`prepared`), and
 * its outcome; on failure the savepoint is rolled back, so
 * none of the routine's writes remain. The outcome is recorded by the caller, with the batch's others.
 * `deferred` when its routine lock is held by another batch (rolled back too, not a try).
 */
export async function runClaimed(
  rt: EngineRuntime,
  trx: ControlledTransaction<DB>,
  claimed: ClaimedRoutine,
  options: { logLines: string[]; prepared: Prepared; locks: BatchLocks },
): Promise<Attempt | 'deferred'> {
  const { logLines, prepared, locks } = options;
  const effects: AttemptEffects = { hasChained: false, chains: [], details: [] };
  locks.readAhead?.started.add(claimed.id);
  rt.activeCount += 1;
  const startedAt = Date.now();
  try {
    const definition = rt.catalog.get(claimed.routine_name);
    let failure: unknown = prepared.failure;
    if (definition === undefined) {
      failure = new PermanentRoutineError(`Unknown routine: ${claimed.routine_name}`);
    } else if (failure === undefined) {
      const savepoint = await openLazySavepoint(trx, 'routine', rt.eagerSavepointIds.has(claimed.id));
      const keys: string[] = [];
      try {
        const prepareContext = createPrepareContext(rt, claimed, trx, logLines);
        const context = createRunContext(rt, trx, prepareContext, definition, {
          startedAt,
          effects,
          locks,
          keys,
          yieldTurn: createYieldTurn(rt, definition.timeoutMs, rt.now().getTime()),
        });
        // Async, so that a routine that throws before its first await fails as one that rejects.
        const run = async () => definition.run(context, prepared.prepared);
        await withTimeout(run(), definition.timeoutMs);
        // Not released: every engine lets the next routine of a batch reuse the name, and a release
        // would cost one more round trip per routine.
      } catch (error) {
        if (error instanceof RoutineTimeoutError) {
          throw new RoutineTimeoutError(definition.timeoutMs, claimed, logLines);
        }
        if (savepoint.failedOutside) {
          // The transaction may be unusable: the batch rolls back, and this routine runs next time
          // with its savepoint open from the start, so that it fails alone.
          rt.eagerSavepointIds.add(claimed.id);
          throw error;
        }
        // No savepoint: the routine wrote nothing and took no lock.
        if (savepoint.isOpen) await rollbackToSavepoint(trx, 'routine');
        for (const key of keys) locks.keys.delete(key);
        if (error instanceof RoutineLockBusyError) return 'deferred';
        failure = error;
      } finally {
        savepoint.restore();
      }
    }
    return {
      claimed,
      record: outcomeOf(rt, claimed, definition, failure, logLines),
      failure,
      startedAt,
      effects,
    };
  } finally {
    rt.activeCount -= 1;
  }
}
