/**
 * `/readyz`: whether this instance can do its work, writes included. Every audited call writes its audit
 * row (a write's before it is answered, a read's just after), so a database that answers reads but cannot
 * write (disk full, read-only after a failover) makes the service useless: the instance must leave the
 * load balancer's rotation. (`app.ts` adds the read audit sink's own state.)
 *
 * A check reads (`select 1`) and then makes one durable write (the readiness row of `rate_limit_counter`).
 * Checks are cheap but not free (one commit; on SQLite an fsync), and the route is open: concurrent
 * checks share one probe, and an answer is reused for `REUSE_MS`.
 */
import type { Database } from '../db/database.ts';
import { probeWrite } from '../db/counters.queries.ts';

export type Readiness = 'ready' | 'database unreachable' | 'database not writable';

const REUSE_MS = 1000;

/** The readiness of `database`, probed at most once per `REUSE_MS`. */
export function createReadinessCheck(database: Database): () => Promise<Readiness> {
  let last: { readonly answer: Readiness; readonly at: number } | undefined;
  let running: Promise<Readiness> | undefined;

  async function probe(): Promise<Readiness> {
    if (!(await database.isReachable())) return 'database unreachable';
    try {
      await probeWrite(database, Date.now());
      return 'ready';
    } catch {
      return 'database not writable';
    }
  }

  return () => {
    if (last !== undefined && Date.now() - last.at < REUSE_MS) return Promise.resolve(last.answer);
    running ??= probe()
      .then((answer) => {
        last = { answer, at: Date.now() };
        return answer;
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };
}
