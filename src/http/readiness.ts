/**
 * `/readyz`: whether this instance can do its work, writes included. Every audited call writes its audit
 * row (a write's before it is answered, a read's just after), so a database that answers reads but cannot
 * write (disk full, read-only after a failover) makes the service useless: the instance must leave the
 * load balancer's rotation; so must an instance whose read audit sink is behind (reads answer 503 then,
 * modules/audit/audit-sink.ts).
 *
 * A check reads (`select 1`) and then makes one durable write (the readiness row of `rate_limit_counter`).
 * Checks are cheap but not free (one commit; on SQLite an fsync), and the route is open: concurrent
 * checks share one probe, and an answer is reused for `REUSE_MS`.
 */
import type { FastifyInstance } from 'fastify';
import type { Database } from '../db/database.ts';
import { probeWrite } from '../db/counters.queries.ts';
import { statusBody } from './route-doc.ts';

export type Readiness = 'ready' | 'database unreachable' | 'database not writable';

/** Every answer of `/readyz` but `ready`, each a 503. */
export const NOT_READY: readonly string[] = [
  'database unreachable',
  'database not writable',
  'audit trail behind',
] satisfies readonly (Exclude<Readiness, 'ready'> | 'audit trail behind')[];

/**
 * `/healthz` (the process answers) and `/readyz` (this instance can do its work). `isAuditBehind` tells
 * whether the read audit sink refuses reads.
 */
export function installHealthRoutes(
  app: FastifyInstance,
  database: Database,
  isAuditBehind: () => boolean,
): void {
  app.get(
    '/healthz',
    {
      config: {
        doc: {
          tag: 'operations',
          operations: {
            GET: {
              summary: 'Liveness',
              responses: { 200: { description: 'The process answers.', schema: statusBody(['ok']) } },
            },
          },
        },
      },
    },
    async () => ({ status: 'ok' }),
  );
  const readiness = createReadinessCheck(database);
  app.get(
    '/readyz',
    {
      config: {
        doc: {
          tag: 'operations',
          operations: {
            GET: {
              summary: 'Readiness',
              description:
                'Ready when the database answers and takes a write, and the read audit trail keeps up.',
              responses: {
                200: { description: 'Ready.', schema: statusBody(['ready']) },
                503: {
                  description:
                    'Not ready, the status says why: `database unreachable`; `database not writable` (disk ' +
                    'full, read-only after a failover); `audit trail behind` (the read audit sink refuses ' +
                    'reads: its backlog or lag is over its bound).',
                  schema: statusBody([...NOT_READY]),
                },
              },
            },
          },
        },
      },
    },
    async (_request, reply) => {
      const database = await readiness();
      const status = database === 'ready' && isAuditBehind() ? 'audit trail behind' : database;
      return reply.code(status === 'ready' ? 200 : 503).send({ status });
    },
  );
}

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
