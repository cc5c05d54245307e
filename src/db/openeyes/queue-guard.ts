/**
 * One engine per queue on an OpenEyes database: OpenEyes's Java payload processor takes
 * its queue's `request_queue_lock` row `FOR UPDATE NOWAIT` and holds it for its life. The service's
 * workers hold the same rows in share mode, also without waiting: several workers of the service share
 * a queue (shared locks), but never with the Java processor. Whichever engine starts second is refused.
 *
 * The locks live in a transaction on a connection of their own (not the pool's), kept active by a ping,
 * so that neither `idle_transaction_timeout` nor `wait_timeout` ends it. When the connection is lost the
 * locks are taken again; if another engine took them meanwhile, `onLost` is told.
 */
import mysql from 'mysql2/promise';
import { StartupError } from '../../errors.ts';
import { mysqlConnectionOptions } from '../dialects/mysql.ts';

/** Another engine (the Java payload processor) serves the queue. */
export class QueueHeldElsewhereError extends StartupError {
  constructor(queue: string) {
    super(
      `Another engine holds request queue ${queue} (its request_queue_lock row is locked, likely by ` +
        "OpenEyes's Java payload processor): stop it before starting the service's queue worker.",
    );
    this.name = 'QueueHeldElsewhereError';
  }
}

export interface QueueLockHold {
  release(): Promise<void>;
}

const PING_MS = 60_000;

async function lockQueues(url: string, queues: readonly string[]): Promise<mysql.Connection> {
  const connection = await mysql.createConnection({
    ...mysqlConnectionOptions(url),
    charset: 'utf8mb4',
    connectTimeout: 5000,
    enableKeepAlive: true,
  });
  try {
    const [[server]] = (await connection.query('select version() as version')) as unknown as [
      { version: string }[],
    ];
    // MariaDB writes a shared lock without waiting LOCK IN SHARE MODE NOWAIT; MySQL FOR SHARE NOWAIT.
    const shareNoWait = /mariadb/i.test(server?.version ?? '')
      ? 'lock in share mode nowait'
      : 'for share nowait';
    await connection.query('/*M! set session idle_transaction_timeout = 0 */');
    for (const queue of queues) {
      // The Java processor creates a queue's row when it is missing; so does this (outside the lock).
      const [rows] = (await connection.execute(
        'select request_queue from request_queue_lock where request_queue = ?',
        [queue],
      )) as unknown as [unknown[]];
      if (rows.length === 0) {
        try {
          await connection.execute('insert into request_queue_lock (request_queue) values (?)', [queue]);
        } catch (error) {
          // Another engine created it meanwhile (duplicate entry): the lock below decides.
          if ((error as { errno?: number }).errno !== 1062) throw error;
        }
      }
    }
    await connection.query('start transaction');
    for (const queue of queues) {
      try {
        await connection.execute(
          `select request_queue from request_queue_lock where request_queue = ? ${shareNoWait}`,
          [queue],
        );
      } catch (error) {
        // 1205 lock wait timeout / 3572 (MySQL) ER_LOCK_NOWAIT / MariaDB 1205 with NOWAIT.
        const { errno } = error as { errno?: number };
        if (errno === 1205 || errno === 3572) throw new QueueHeldElsewhereError(queue);
        throw error;
      }
    }
    return connection;
  } catch (error) {
    await connection.end().catch(() => {});
    throw error;
  }
}

/**
 * Holds the `request_queue_lock` rows of `queues` in share mode until `release`; throws
 * {@link QueueHeldElsewhereError} when another engine holds one.
 */
export async function holdQueueLocks(
  url: string,
  queues: readonly string[],
  onLost: (error: unknown) => void,
): Promise<QueueLockHold> {
  let connection: mysql.Connection | undefined = await lockQueues(url, queues);
  let isReleased = false;
  const timer = setInterval(() => {
    void (async () => {
      try {
        if (connection === undefined) connection = await lockQueues(url, queues);
        else await connection.query('select 1');
      } catch (error) {
        await connection?.end().catch(() => {});
        connection = undefined;
        if (isReleased) return;
        try {
          connection = await lockQueues(url, queues);
        } catch (again) {
          onLost(again instanceof QueueHeldElsewhereError ? again : error);
        }
      }
    })();
  }, PING_MS);
  timer.unref();
  return {
    async release() {
      isReleased = true;
      clearInterval(timer);
      await connection?.end().catch(() => {});
      connection = undefined;
    },
  };
}
