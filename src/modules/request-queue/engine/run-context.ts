/**
 * The contexts a routine runs with: `PrepareContext` (reads only) and `RoutineContext` (its savepoint of
 * the batch's transaction, the request's JSON rows read once per attempt, chaining, and routine locks).
 *
 * Routine locks (`ctx.lock(key)`, a patient or a study) are held until the batch commits, so routines of
 * one patient in one batch share the key. The first key a batch takes may wait for another worker's
 * batch; a batch that holds a key never waits for another one: a key held elsewhere puts its routine
 * back untried (`deferred`, rolled back to its savepoint, its mark cleared) for a later batch, whose
 * first key then waits. No transaction waits while holding a key, so two batches never deadlock.
 */
import type { Kysely, Transaction } from 'kysely';
import { formatDateTime } from '../../../db/database.ts';
import type { DB } from '../../../db/schema.ts';
import { readRequestContent, readRequestText, writeRequestText } from '../../attachment-data/index.ts';
import type { AttemptEffects } from './attempts.ts';
import type { ClaimedRoutine } from './claim.queries.ts';
import { addRequestRoutines, voidNewRoutines } from './claim.queries.ts';
import { mirrorRequestDetails } from './request-details.ts';
import type { PrepareContext, RoutineContext, RoutineDefinition } from './routine-catalog.ts';
import type { EngineRuntime } from './runtime.ts';

/** The routine locks a batch holds (until it commits). */
export interface BatchLocks {
  readonly keys: Set<string>;
}

/** What a run context records about its attempt. */
export interface AttemptScope {
  readonly startedAt: number;
  readonly effects: AttemptEffects;
  readonly locks: BatchLocks;
  /** The keys this attempt took: released with its savepoint when it fails. */
  readonly keys: string[];
}

/**
 * A batch that already holds a routine lock asked for a key another batch holds: the routine is put back
 * untried rather than wait (see the top of this file). Routines let it propagate.
 */
export class RoutineLockBusyError extends Error {
  constructor(key: string) {
    super(`Routine lock ${key} is held by another worker`);
    this.name = 'RoutineLockBusyError';
  }
}

/** The audit stamp of the worker's writes: the system user 1, at `now`. */
function stampOf(now: Date) {
  return { userId: 1, now: formatDateTime(now) };
}

export function createPrepareContext(
  rt: EngineRuntime,
  claimed: ClaimedRoutine,
  reader: Kysely<DB>,
  logLines: string[],
): PrepareContext {
  return {
    db: reader,
    routine: claimed,
    requestType: claimed.request_type,
    config: rt.config,
    dialect: rt.dialect,
    now: rt.now,
    log: (line) => logLines.push(line),
    readText: (mnemonic) => readRequestText(reader, claimed.request_id, mnemonic),
  };
}

export function createRunContext(
  rt: EngineRuntime,
  trx: Transaction<DB>,
  base: PrepareContext,
  definition: RoutineDefinition,
  attempt: AttemptScope,
): RoutineContext {
  const routine = base.routine;
  const { dialect, database } = rt;
  const chain = async (names: readonly string[], sequence: 'append' | 'priority') => {
    attempt.effects.hasChained = true;
    await addRequestRoutines(
      trx,
      { requestId: routine.request_id, queue: routine.execute_request_queue, names, sequence },
      rt.knownRoutineNames,
    );
  };
  // The request's JSON rows this attempt read or wrote, so that each is read once: every change to
  // them goes through putText and mergeRequestData, which keep this up to date.
  const texts = new Map<string, Record<string, unknown>>();
  const cachedTexts = (mnemonics: readonly string[]) =>
    Object.fromEntries(mnemonics.map((m) => [m, structuredClone(texts.get(m)!)]));
  const readRequest = async (mnemonics: readonly string[]) => {
    const missing = mnemonics.filter((m) => !texts.has(m));
    const content = await readRequestContent(trx, routine.request_id, missing, dialect);
    for (const mnemonic of missing) texts.set(mnemonic, content.texts[mnemonic] ?? {});
    return { texts: cachedTexts(mnemonics), payloads: content.payloads };
  };
  const readTexts = async (mnemonics: readonly string[]) =>
    mnemonics.every((m) => texts.has(m)) ? cachedTexts(mnemonics) : (await readRequest(mnemonics)).texts;
  const putText = async (mnemonic: string, value: Record<string, unknown>) => {
    await writeRequestText(trx, dialect, routine.request_id, mnemonic, value, stampOf(base.now()));
    texts.set(mnemonic, structuredClone(value));
  };
  return {
    ...base,
    db: trx,
    trx,
    dialect,
    schema: database.schema,
    stamp: () => stampOf(base.now()),
    readText: async (mnemonic) => (await readTexts([mnemonic]))[mnemonic]!,
    readTexts,
    readRequest,
    reference: (key, load) => rt.references.get(key, () => load(trx)),
    putText,
    mergeRequestData: async (patch) => {
      const current = (await readTexts(['REQUEST_DATA'])).REQUEST_DATA!;
      await putText('REQUEST_DATA', { ...current, ...patch });
      await mirrorRequestDetails(trx, database, routine.request_id, patch, stampOf(base.now()));
    },
    addRoutine: (name) => chain([name], 'append'),
    addRoutines: (names) => chain(names, 'append'),
    addPriorityRoutine: (name) => chain([name], 'priority'),
    voidAllNewRoutines: (current) =>
      voidNewRoutines(trx, routine.request_id, current ?? routine.routine_name),
    lock: (key) => lockRoutineKey(rt, trx, definition, attempt, key),
  };
}

/** `ctx.lock(key)`: the batch's first key waits; a later one held elsewhere defers the routine. */
async function lockRoutineKey(
  rt: EngineRuntime,
  trx: Transaction<DB>,
  definition: RoutineDefinition,
  attempt: AttemptScope,
  key: string,
): Promise<void> {
  const { locks } = attempt;
  if (locks.keys.has(key)) return;
  const target = { table: 'request_routine_lock', column: 'routine_lock', key };
  if (locks.keys.size === 0) {
    await rt.dialect.lockNamedRow(trx, target, definition.timeoutMs - (Date.now() - attempt.startedAt));
  } else if (!(await rt.dialect.tryLockNamedRow(trx, target))) {
    throw new RoutineLockBusyError(key);
  }
  locks.keys.add(key);
  attempt.keys.push(key);
}
