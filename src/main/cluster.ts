/**
 * The primary of a multi-process server (`SERVER_PROCESSES` > 1, node:cluster). The primary serves no
 * request and holds no database connection: it forks one server process per slot, restarts a process that
 * exits unexpectedly with an exponential back-off, and on SIGTERM/SIGINT forwards SIGTERM to every
 * process, waits for them to finish their in-flight requests, and exits 0 when all stopped cleanly.
 *
 * The listening socket is shared through the cluster module (the primary accepts connections and hands
 * them to the processes in turn), so every process serves the same host and port.
 */
import type { Worker } from 'node:cluster';
import cluster from 'node:cluster';
import type { Logger } from '../logger.ts';

export interface PrimaryOptions {
  readonly processes: number;
  readonly logger: Logger;
  /** Environment overrides of the process of `slot` (0-based), e.g. the queue worker only in slot 0. */
  readonly envOf: (slot: number) => Record<string, string>;
  /** Logged once every process of the first generation listens (the single-process ready line). */
  readonly readyMessage: string;
}

/** First restart delay; doubled per crash in a row of the same slot, capped at {@link MAX_RESTART_MS}. */
const FIRST_RESTART_MS = 500;
const MAX_RESTART_MS = 30_000;
/** A process that ran this long before exiting resets its slot's back-off. */
const STABLE_AFTER_MS = 60_000;
/** Processes still running this long after SIGTERM are killed, and the primary exits 1. */
const STOP_TIMEOUT_MS = 35_000;

interface Slot {
  worker?: Worker;
  startedAt: number;
  crashesInARow: number;
  restartTimer?: NodeJS.Timeout;
  hasListened: boolean;
}

export function runPrimary(options: PrimaryOptions): void {
  const { logger, processes } = options;
  const slots: Slot[] = Array.from({ length: processes }, () => ({
    startedAt: 0,
    crashesInARow: 0,
    hasListened: false,
  }));
  let isStopping = false;
  let isReady = false;
  let hadUncleanExit = false;

  const fork = (index: number): void => {
    const slot = slots[index]!;
    slot.restartTimer = undefined;
    slot.startedAt = Date.now();
    slot.hasListened = false;
    const worker = cluster.fork(options.envOf(index));
    slot.worker = worker;
    worker.on('listening', () => {
      slot.hasListened = true;
      if (!isReady && slots.every((s) => s.hasListened)) {
        isReady = true;
        logger.info({ processes, pids: slots.map((s) => s.worker?.process.pid) }, options.readyMessage);
      }
    });
    worker.on('exit', (code, signal) => {
      slot.worker = undefined;
      if (isStopping) {
        // A process killed by the SIGTERM before it installed its handlers had not listened yet: no loss.
        if (code !== 0 && !(signal === 'SIGTERM' && !slot.hasListened)) hadUncleanExit = true;
        logger.info({ slot: index, pid: worker.process.pid, code, signal }, 'server process stopped');
        if (slots.every((s) => s.worker === undefined)) {
          logger.info('stopped');
          process.exit(hadUncleanExit ? 1 : 0);
        }
        return;
      }
      if (Date.now() - slot.startedAt >= STABLE_AFTER_MS) slot.crashesInARow = 0;
      const delay = Math.min(MAX_RESTART_MS, FIRST_RESTART_MS * 2 ** slot.crashesInARow);
      slot.crashesInARow += 1;
      logger.error(
        { slot: index, pid: worker.process.pid, code, signal, restartInMs: delay },
        'server process exited unexpectedly; restarting',
      );
      slot.restartTimer = setTimeout(() => fork(index), delay);
    });
  };

  const stop = (signal: string): void => {
    if (isStopping) return;
    isStopping = true;
    logger.info({ signal, processes }, 'stopping');
    for (const slot of slots) {
      if (slot.restartTimer !== undefined) clearTimeout(slot.restartTimer);
      slot.restartTimer = undefined;
      slot.worker?.process.kill('SIGTERM');
    }
    if (slots.every((s) => s.worker === undefined)) {
      logger.info('stopped');
      process.exit(0);
    }
    setTimeout(() => {
      logger.error('graceful stop timed out; killing the remaining server processes');
      for (const slot of slots) slot.worker?.process.kill('SIGKILL');
      process.exit(1);
    }, STOP_TIMEOUT_MS).unref();
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));

  for (let index = 0; index < processes; index += 1) fork(index);
}
