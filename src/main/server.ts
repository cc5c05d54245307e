/**
 * The API server process: loadConfig -> openDatabase (migrated) -> buildApp -> listen. Stops gracefully on
 * SIGTERM/SIGINT: stops accepting, finishes in-flight requests, then closes the pool.
 */
import { buildApp } from '../app.ts';
import { startOrphanSweep } from '../files/orphan-sweep.ts';
import { createLogger } from '../logger.ts';
import { createAuthenticator } from '../modules/user/index.ts';
import { loadDemoData } from '../modules/dataset/index.ts';
import { createQueueWorker } from '../modules/request-queue/index.ts';
import { bootstrap, isNewDatabase, loadConfigOrExit } from './bootstrap.ts';

const config = loadConfigOrExit();
const logger = createLogger(config.logLevel);
const { database, files, migrations } = await bootstrap(config);
if (migrations.applied.length > 0) logger.info({ migrations: migrations.applied }, 'database migrated');

const wantsDemo =
  config.demoData === 'on' ||
  (config.demoData === 'auto' && config.database.kind === 'sqlite' && isNewDatabase(migrations));
if (wantsDemo) {
  const account = await loadDemoData({ database, files, config });
  if (account !== undefined) {
    logger.info(
      `demo data loaded; demo account: username "${account.username}", password "${account.password}"`,
    );
  }
}

const deps = {
  config,
  database,
  files,
  authenticator: createAuthenticator(database.db, { cacheTtlMs: config.authCacheTtlMs }),
};
const app = await buildApp(deps, { logger });
// The in-process queue worker (WORKER=in-process); run `npm run worker` processes instead with WORKER=off.
const worker =
  config.worker === 'in-process' ? createQueueWorker({ database, files, config, logger }) : undefined;
await worker?.start();
const { orphanSweepIntervalMs: intervalMs, orphanSweepGraceMs: graceMs } = config;
const sweeper = startOrphanSweep({ database, files, logger, intervalMs, graceMs });

let isStopping = false;
async function stop(signal: string): Promise<void> {
  if (isStopping) return;
  isStopping = true;
  logger.info({ signal }, 'stopping');
  const timer = setTimeout(() => {
    logger.error('graceful stop timed out');
    process.exit(1);
  }, 30_000);
  timer.unref();
  await app.close();
  await worker?.stop();
  await sweeper.stop();
  await database.close();
  logger.info('stopped');
}
process.once('SIGTERM', () => void stop('SIGTERM'));
process.once('SIGINT', () => void stop('SIGINT'));

await app.listen({ port: config.port, host: config.host });
logger.info({ database: config.database.kind, filesDir: config.filesDir }, 'clinical-records-api ready');
