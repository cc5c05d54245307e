/**
 * Child process entry of the auth bench: the real app (`buildApp`, same config, logger, authenticator and
 * hooks as src/main/server.ts) plus two bench-only routes that answer the same bytes, `GET /bench/plain`
 * (no guard) and `GET /bench/auth` (the Basic guard requiring `OprnApi`), so that their difference is the
 * cost of the guard alone. Never part of the product.
 */
import { buildApp } from '../src/app.ts';
import { bootstrap, loadConfigOrExit } from '../src/main/bootstrap.ts';
import { createLogger } from '../src/logger.ts';
import { createAuthenticator } from '../src/modules/user/index.ts';
import { registerBenchAuthRoutes } from './auth.ts';

const config = loadConfigOrExit();
const logger = createLogger(config.logLevel);
const { database, files } = await bootstrap(config);
const deps = {
  config,
  database,
  files,
  authenticator: createAuthenticator(database.db, { cacheTtlMs: config.authCacheTtlMs }),
};
const app = await buildApp(deps, {
  logger,
  extraRoutes: registerBenchAuthRoutes,
});
process.once('SIGTERM', () => {
  void app.close().then(() => database.close());
});
await app.listen({ port: config.port, host: config.host });
