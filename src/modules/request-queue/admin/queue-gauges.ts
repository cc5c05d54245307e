/**
 * The queue's families of `/metrics`, read from the database at scrape time: routines per queue and
 * status (one grouped query over an index that leads with queue and status), the requests waiting for a
 * patient per queue, and the routine outcomes
 * that `request_queue` counts. The families of one scrape share one read; when it fails they have no
 * samples and `metrics_database_query_ok` is 0.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { Registry } from 'prom-client';
import type { DB } from '../../../db/schema.ts';
import type { AppDeps } from '../../../deps.ts';
import { waitingForPatientRoutines } from './queue-health.ts';

export interface QueueGauges {
  readonly routines: readonly { queue: string; status: string; count: number }[];
  readonly queues: readonly { queue: string; executed: number; succeeded: number; failed: number }[];
  /** Requests waiting for a patient, per queue (`status/waiting.ts`). */
  readonly waitingForPatient: readonly { queue: string; count: number }[];
}

/** Routine counts per queue and status, and each queue's outcome counters. */
export async function readQueueGauges(db: Kysely<DB>): Promise<QueueGauges> {
  const [routines, queues, waiting] = await Promise.all([
    db
      .selectFrom('request_routine')
      .select(['execute_request_queue as queue', 'status', sql<number>`count(*)`.as('count')])
      .groupBy(['execute_request_queue', 'status'])
      .execute(),
    db
      .selectFrom('request_queue')
      .select([
        'request_queue as queue',
        'total_execute_count as executed',
        'total_success_count as succeeded',
        'total_fail_count as failed',
      ])
      .execute(),
    waitingForPatientRoutines(db)
      .select(['w.execute_request_queue as queue', sql<number>`count(*)`.as('count')])
      .groupBy('w.execute_request_queue')
      .execute(),
  ]);
  return {
    routines: routines.map((r) => ({ queue: r.queue, status: r.status, count: Number(r.count) })),
    queues: queues.map((q) => ({
      queue: q.queue,
      executed: Number(q.executed),
      succeeded: Number(q.succeeded),
      failed: Number(q.failed),
    })),
    waitingForPatient: waiting.map((w) => ({ queue: w.queue, count: Number(w.count) })),
  };
}

/**
 * Registers the queue's collectors on `registry`; a failed read is logged by error class only. prom-client
 * is loaded here, when metrics are on, rather than with the module.
 */
export async function registerQueueGauges(
  registry: Registry,
  deps: Pick<AppDeps, 'database'>,
  log: Pick<FastifyBaseLogger, 'warn'>,
): Promise<void> {
  const { Counter, Gauge } = await import('prom-client');
  const db = deps.database.db;
  let reading: Promise<QueueGauges | undefined> | undefined;
  // Every collector of a scrape starts before any read settles, so they share this one.
  const read = () =>
    (reading ??= readQueueGauges(db)
      .catch((error: unknown) => {
        log.warn({ errorClass: (error as Error).constructor.name }, 'metrics: queue query failed');
        return undefined;
      })
      .finally(() => {
        reading = undefined;
      }));

  new Gauge({
    name: 'metrics_database_query_ok',
    help: 'Whether the queue queries of this scrape succeeded.',
    registers: [registry],
    async collect() {
      this.set((await read()) === undefined ? 0 : 1);
    },
  });
  new Gauge({
    name: 'request_queue_routines',
    help: 'Routines in request_routine, by queue and status.',
    labelNames: ['queue', 'status'] as const,
    registers: [registry],
    async collect() {
      const gauges = await read();
      this.reset();
      for (const r of gauges?.routines ?? []) this.set({ queue: r.queue, status: r.status }, r.count);
    },
  });
  new Gauge({
    name: 'request_queue_waiting_for_patient',
    help: 'Requests whose PATIENT_MATCH found no patient (or several) and waits for its next try, by queue.',
    labelNames: ['queue'] as const,
    registers: [registry],
    async collect() {
      const gauges = await read();
      this.reset();
      for (const q of gauges?.queues ?? []) this.set({ queue: q.queue }, 0);
      for (const w of gauges?.waitingForPatient ?? []) this.set({ queue: w.queue }, w.count);
    },
  });
  const outcome = (name: string, help: string, valueOf: (q: QueueGauges['queues'][number]) => number) =>
    new Counter({
      name,
      help,
      labelNames: ['queue'] as const,
      registers: [registry],
      async collect() {
        const gauges = await read();
        this.reset();
        for (const q of gauges?.queues ?? []) this.inc({ queue: q.queue }, valueOf(q));
      },
    });
  outcome(
    'request_queue_routines_executed_total',
    'Routine executions, from request_queue.total_execute_count.',
    (q) => q.executed,
  );
  outcome(
    'request_queue_routines_succeeded_total',
    'Successful routine executions, from request_queue.total_success_count.',
    (q) => q.succeeded,
  );
  outcome(
    'request_queue_routines_failed_total',
    'Failed routine executions, from request_queue.total_fail_count.',
    (q) => q.failed,
  );
}
