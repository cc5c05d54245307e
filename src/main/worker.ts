/**
 * The queue worker process (`npm run worker`): loadConfig -> bootstrap (migrated database, file store) ->
 * start the queue worker -> run until SIGTERM/SIGINT, then stop claiming, let the routines in flight finish
 * (their transactions commit or roll back; nothing is left half done), flush the queue counters and close
 * the pool. Several of these processes may serve one PostgreSQL database; on SQLite only one (or the
 * server's in-process worker) can: a second one is refused at start with a message (a lock).
 */
import { createLogger } from '../logger.ts';
import { createQueueWorker } from '../modules/request-queue/index.ts';
import { createAuditTrail } from '../modules/audit/index.ts';
import { createFilingCatalog } from '../modules/filing/index.ts';
import { createPasQuery } from '../modules/hl7/index.ts';
import { bootstrap, loadConfigOrExit, lockQueueWorkerOrExit, runOrExit } from './bootstrap.ts';
import { startIdleCollector } from './idle-collector.ts';

const config = loadConfigOrExit();
const logger = createLogger(config.logLevel);
const workerLock = lockQueueWorkerOrExit(config, logger);
const { database, migrations } = await runOrExit(() => bootstrap(config));
if (migrations.applied.length > 0) logger.info({ migrations: migrations.applied }, 'database migrated');

// This process serves only the queue: each queue gets its `maximum_active_threads` (or
// WORKER_CONCURRENCY) slots, and slots beyond the pool wait for a connection.
// PATIENT_MATCH asks the PAS (PAS_QUERY_HOST) for a patient the database lacks.
const pasQuery = await createPasQuery({ database, config, logger, auditTrail: createAuditTrail(database) });
const worker = createQueueWorker({
  database,
  config,
  catalog: createFilingCatalog(pasQuery === undefined ? {} : { missingPatients: pasQuery }),
  logger,
  maxSlotsPerQueue: Number.POSITIVE_INFINITY,
});

let isStopping = false;
async function stop(signal: string): Promise<void> {
  if (isStopping) return;
  isStopping = true;
  logger.info({ signal }, 'stopping');
  const timer = setTimeout(() => {
    logger.error('graceful stop timed out');
    process.exit(1);
  }, 60_000);
  timer.unref();
  await worker.stop();
  await database.close();
  workerLock.release();
  logger.info('stopped');
}
process.once('SIGTERM', () => void stop('SIGTERM'));
process.once('SIGINT', () => void stop('SIGINT'));

await runOrExit(() => worker.start());
// Memory that large routines dropped goes back once the process is idle.
startIdleCollector();
logger.info({ database: config.database.kind }, 'queue worker ready');
