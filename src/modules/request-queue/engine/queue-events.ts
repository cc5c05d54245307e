/**
 * Wake-ups of idle workers after a request is committed: in this process through
 * {@link onRequestQueued} (the worker inside the server, and engines without notifications), and across
 * processes through the dialect's notifications on channel `request_queue` ({@link notifyQueueAfterCommit}).
 */
import type { Database } from '../../../db/database.ts';

/** What a listener learns: the new request and the queue of its first routine. */
export interface RequestQueuedEvent {
  readonly requestId: number;
  readonly queue: string;
}

export type RequestQueuedListener = (event: RequestQueuedEvent) => void;

/** The channel `enqueueRequest` notifies; the payload is the queue name. */
export const REQUEST_QUEUE_CHANNEL = 'request_queue';

const listeners = new Set<RequestQueuedListener>();

/** Subscribes to committed requests of this process; returns the unsubscribe function. */
export function onRequestQueued(listener: RequestQueuedListener): () => void {
  listeners.add(listener);
  return () => {
    listeners.delete(listener);
  };
}

/** Tells every listener about a committed request. A throwing listener does not stop the others. */
export function emitRequestQueued(event: RequestQueuedEvent): void {
  for (const listener of listeners) {
    try {
      listener(event);
    } catch {
      // A wake-up is only a hint: the worker also polls, so a failed listener loses nothing.
    }
  }
}

/**
 * Per database and queue: whether a NOTIFY is being sent, whether another is owed after it, and when the
 * sending ends.
 */
const pendingNotifies = new WeakMap<Database, Map<string, { isOwed: boolean; sent: Promise<void> }>>();

/**
 * Notifies `request_queue` with the queue name after a commit, without delaying the caller (nothing where
 * the dialect has no notifications). Why not inside the intake transaction: PostgreSQL serialises the commits of every transaction that notifies (a global
 * lock held across the commit and its WAL flush), which would cap intake at one commit per disk flush.
 * Sending it after the commit keeps intake's commits in parallel, and the worker still never hears of a
 * request it cannot see. Notifications for one queue are coalesced: while one is being sent, later
 * commits only ask for one more. A lost wake-up costs nothing but latency: workers also poll.
 */
export function notifyQueueAfterCommit(database: Database, queue: string): void {
  if (!database.dialect.hasNotifications) return;
  let perQueue = pendingNotifies.get(database);
  if (perQueue === undefined) {
    perQueue = new Map();
    pendingNotifies.set(database, perQueue);
  }
  const pending = perQueue.get(queue);
  if (pending !== undefined) {
    pending.isOwed = true;
    return;
  }
  const state = { isOwed: true, sent: Promise.resolve() };
  perQueue.set(queue, state);
  const queues = perQueue;
  state.sent = (async () => {
    try {
      while (state.isOwed) {
        state.isOwed = false;
        await database.dialect.notify(REQUEST_QUEUE_CHANNEL, queue);
      }
    } catch {
      // The database is unreachable or closing: the workers' poll picks the request up.
    } finally {
      queues.delete(queue);
    }
  })();
}

/**
 * Resolves once every notification {@link notifyQueueAfterCommit} is sending on `database` has been
 * sent (or given up): a short-lived process (the CLI) waits for it before it closes the database, so
 * that its wake-ups are not lost with the pool.
 */
export async function queueNotificationsSent(database: Database): Promise<void> {
  const perQueue = pendingNotifies.get(database);
  if (perQueue === undefined) return;
  await Promise.all([...perQueue.values()].map((state) => state.sent));
}
