/**
 * In-process wake-up of idle workers after a request is queued. Cross-process wake-ups on PostgreSQL use
 * `NOTIFY request_queue, '<queue>'`, sent by `enqueueRequest` inside its transaction so that it fires at
 * commit; this hook covers the worker that runs inside the server process (and SQLite, which has no
 * NOTIFY).
 */

/** What a listener learns: the new request and the queue of its first routine. */
export interface RequestQueuedEvent {
  readonly requestId: number;
  readonly queue: string;
}

export type RequestQueuedListener = (event: RequestQueuedEvent) => void;

/** The PostgreSQL channel `enqueueRequest` notifies; the payload is the queue name. */
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
