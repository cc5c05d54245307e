/**
 * The API server process: loadConfig -> openDatabase (migrated) -> buildApp -> listen. Stops gracefully on
 * SIGTERM/SIGINT: stops accepting, finishes in-flight requests, then closes the pool. With `DICOM_PORT` set it
 * also runs the DICOM C-STORE SCP (modules/dicom-receive), with `HL7_PORT` the HL7 MLLP listener
 * (modules/hl7), both stopped the same way.
 *
 * With `SERVER_PROCESSES` > 1 (or `auto`, one per core) this process becomes a node:cluster primary
 * (`cluster.ts`): it runs the migrations and the demo data once, closes its database, then forks that many
 * server processes sharing the port. The in-process queue worker (`WORKER=in-process`) and the orphan
 * file sweep then run in the first server process only; the others get `WORKER=off` and no sweep.
 */
import cluster from 'node:cluster';
import { buildApp } from '../app.ts';
import { createAppServices } from '../app-services.ts';
import { startOrphanSweep } from '../files/orphan-sweep.ts';
import type { Config } from '../config.ts';
import { openDatabase } from '../db/database.ts';
import { resolveUploadLimit } from '../db/upload-limit.ts';
import { createLocalFileStore } from '../files/file-store.ts';
import type { Logger } from '../logger.ts';
import { createLogger } from '../logger.ts';
import { demoStartupLines, loadDemoData } from '../modules/dataset/index.ts';
import type { DicomServer } from '../modules/dicom-receive/index.ts';
import { startDicomServer } from '../modules/dicom-receive/index.ts';
import type { Hl7Server } from '../modules/hl7/index.ts';
import { createPasQuery, startHl7Server } from '../modules/hl7/index.ts';
import { createIntakePace, createQueueWorker } from '../modules/request-queue/index.ts';
import { createAuditTrail } from '../modules/audit/index.ts';
import { createFilingCatalog } from '../modules/filing/index.ts';
import { createAuthenticator, hasActiveLogin } from '../modules/user/index.ts';
import type { Bootstrapped } from './bootstrap.ts';
import { bootstrap, isNewDatabase, loadConfigOrExit, lockQueueWorkerOrExit, runOrExit } from './bootstrap.ts';
import { runPrimary } from './cluster.ts';
import { startIdleCollector } from './idle-collector.ts';

const READY = 'clinical-records-api ready';

const config = loadConfigOrExit();
const logger = createLogger(config.logLevel);

if (cluster.isPrimary && config.serverProcesses > 1) {
  const prepared = await prepare(config, logger);
  await prepared.database.close();
  runPrimary({
    processes: config.serverProcesses,
    logger,
    readyMessage: READY,
    // The queue worker and the orphan sweep run in the first process only.
    envOf: (slot): Record<string, string> => ({
      ...(slot === 0
        ? { DEMO_DATA: 'off' }
        : { DEMO_DATA: 'off', WORKER: 'off', ORPHAN_SWEEP_INTERVAL_MS: '0' }),
      // The address the primary chose (127.0.0.1 with demo data and no HOST).
      HOST: prepared.config.host,
    }),
  });
} else if (cluster.isPrimary) {
  await serve(await prepare(config, logger), READY);
} else {
  // A cluster server process: the primary already migrated the database, loaded the demo data and said
  // which upload limit is in force; each process applies that limit too.
  const database = await openDatabase(config.database, { poolSize: config.dbPoolSize });
  const { config: limited } = await runOrExit(async () => resolveUploadLimit(database, config));
  await serve(
    { config: limited, database, files: createLocalFileStore(config.filesDir) },
    'server process ready',
  );
}

/** Migrations (every entry point runs them, under a lock) and, when asked, the demo data. */
async function prepare(config: Config, logger: Logger): Promise<Bootstrapped> {
  const prepared = await runOrExit(() => bootstrap(config));
  const { database, files, migrations } = prepared;
  if (migrations.applied.length > 0) logger.info({ migrations: migrations.applied }, 'database migrated');
  if (prepared.uploadLimitWarning !== undefined) logger.warn(prepared.uploadLimitWarning);
  const wantsDemo =
    config.demoData === 'on' ||
    (config.demoData === 'auto' && config.database.kind === 'sqlite' && isNewDatabase(migrations));
  let served = prepared;
  if (wantsDemo) {
    // The demo accounts' passwords are in the README: unless HOST says otherwise, only this machine.
    if (config.isHostSet !== true) {
      served = { ...prepared, config: { ...prepared.config, host: '127.0.0.1' } };
      const line =
        'demo data: listening on 127.0.0.1 only (the demo passwords are public); set HOST to listen elsewhere';
      if (process.stdout.isTTY) process.stdout.write(`${line}\n`);
      else logger.info(line);
    }
    const account = await loadDemoData({ database, files, config });
    // On a terminal, plain lines that can be copied as the README shows them; otherwise log entries.
    for (const line of account === undefined ? [] : demoStartupLines(account)) {
      if (process.stdout.isTTY) process.stdout.write(`${line}\n`);
      else logger.info(line);
    }
  }
  // Without a login every protected call answers 401, which gives no hint: say what to do.
  if (!(await hasActiveLogin(database.db)))
    logger.warn(
      'no user can log in yet: create one with ' +
        `printf 'a-long-password' | npm run cli -- user create <name> --role 'API access'`,
    );
  return served;
}

async function serve(
  { config, database, files }: Pick<Bootstrapped, 'config' | 'database' | 'files'>,
  readyMessage: string,
): Promise<void> {
  // Before anything listens: a second queue worker on one SQLite database is refused with a message.
  const workerLock = config.worker === 'in-process' ? lockQueueWorkerOrExit(config, logger) : undefined;
  const deps = {
    config,
    database,
    files,
    authenticator: createAuthenticator(database.db, {
      cacheTtlMs: config.authCacheTtlMs,
      database,
    }),
  };
  // Built once: the app's routes and the DIMSE receiver share the audit trail and the queue intake.
  // With the worker in this process, queue add's answers are paced to it (QUEUE_INTAKE_PACE_MS).
  const intakePace =
    workerLock === undefined ? undefined : createIntakePace({ lagTargetMs: config.queueIntakePaceMs });
  // The PAS query (PAS_QUERY_HOST): asked by the search and the in-process worker's PATIENT_MATCH for a
  // patient the database lacks; its rows are audited through the process's one audit trail.
  const auditTrail = createAuditTrail(database);
  const pasQuery = await createPasQuery({ database, config, logger, auditTrail });
  const services = createAppServices(deps, {
    auditTrail,
    ...(intakePace === undefined ? {} : { intakePace }),
    ...(pasQuery === undefined ? {} : { missingPatients: pasQuery }),
  });
  const app = await buildApp(deps, { logger, services });
  // The in-process queue worker (WORKER=in-process); run `npm run worker` processes instead with WORKER=off.
  // On SQLite it holds the lock of the database's one queue worker (taken above) until the process ends.
  const worker =
    workerLock === undefined
      ? undefined
      : createQueueWorker({
          database,
          config,
          catalog: createFilingCatalog(pasQuery === undefined ? {} : { missingPatients: pasQuery }),
          logger,
          ...(intakePace === undefined ? {} : { pace: intakePace }),
        });
  await runOrExit(async () => worker?.start());
  const { orphanSweepIntervalMs: intervalMs, orphanSweepGraceMs: graceMs } = config;
  const sweeper = startOrphanSweep({ database, files, logger, intervalMs, graceMs });
  // Memory that large requests dropped goes back once the process is idle.
  startIdleCollector();

  let isStopping = false;
  // The DIMSE C-STORE SCP (DICOM_PORT), started once the HTTP server listens.
  let dicomServer: DicomServer | undefined;
  // The HL7 MLLP listener (HL7_PORT), started once the HTTP server listens.
  let hl7Server: Hl7Server | undefined;
  async function stop(signal: string): Promise<void> {
    if (isStopping) return;
    isStopping = true;
    logger.info({ signal }, 'stopping');
    const timer = setTimeout(() => {
      // Read audit rows still in memory are lost with the process: say how many.
      logger.error(
        { auditRowsUnwritten: app.auditSink?.stats().backlogRows ?? 0 },
        'graceful stop timed out',
      );
      process.exit(1);
    }, 30_000);
    timer.unref();
    // A keep-alive connection whose last answer leaves during the drain stays open, idle, until its
    // keep-alive timeout (longer than the stop may take); close each one as it goes idle, so that the
    // stop, and the audit rows written after it, do not wait for them.
    const reaper = setInterval(() => app.server.closeIdleConnections(), 100);
    reaper.unref();
    await Promise.all([app.close(), dicomServer?.stop(), hl7Server?.stop()]);
    clearInterval(reaper);
    await worker?.stop();
    await sweeper.stop();
    await database.close();
    workerLock?.release();
    logger.info('stopped');
    // A cluster server process keeps an IPC channel to the primary open; closing it ends the process (exit 0).
    if (cluster.isWorker) process.disconnect();
  }
  process.once('SIGTERM', () => void stop('SIGTERM'));
  process.once('SIGINT', () => void stop('SIGINT'));

  await app.listen({ port: config.port, host: config.host });
  if (config.dicomNetwork.port !== undefined)
    dicomServer = await startDicomServer({
      database,
      config,
      logger,
      uploadMemory: app.uploadMemory,
      auditTrail: services.auditTrail,
      intake: services.intake,
    });
  if (config.hl7.port !== undefined)
    hl7Server = await startHl7Server({ database, config, logger, auditTrail: services.auditTrail });
  await runOrExit(async () => worker?.start());
  logger.info({ database: config.database.kind, filesDir: config.filesDir, host: config.host }, readyMessage);
}
