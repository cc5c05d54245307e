/**
 * Builds the Fastify app from its dependencies: cross-cutting HTTP behaviour (request ids, safe default
 * headers, JSON errors, logs without patient data) and each module's routes. Never listens.
 */
import type { ServerOptions } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import Fastify from 'fastify';
import type { AppServices } from './app-services.ts';
import { createAppServices } from './app-services.ts';
import type { Config } from './config.ts';
import type { AppDeps } from './deps.ts';
import { createBasicAuthGuard } from './http/basic-auth.ts';
import { answerClientError, trackPendingAnswers } from './http/client-error.ts';
import { installErrorHandling } from './http/error-handler.ts';
import { installOverloadGuard } from './http/overload.ts';
import { installMetrics } from './http/metrics.ts';
import { installOpenApi, markGuards } from './http/openapi.ts';
import { installHealthRoutes } from './http/readiness.ts';
import { generateRequestId, installClientRequestIds } from './http/request-id.ts';
import { applySecurityHeaders, httpsServerOptions } from './http/transport-security.ts';
import type { ModuleOptions } from './http/module.ts';
import { createUploadMemory, installSpoolCleanup } from './http/upload-spool.ts';
import type { Logger } from './logger.ts';
import { createLogger } from './logger.ts';
import { attachmentRoutes } from './modules/attachment/index.ts';
import { auditSinkGauges, installAuditTrail } from './modules/audit/index.ts';
import { consoleRoutes } from './modules/console/index.ts';
import { dicomWebRoutes, registerDicomReceiveMetrics } from './modules/dicom-receive/index.ts';
import { registerDicomParseMetrics } from './modules/dicom/index.ts';
import { pasapiRoutes } from './modules/pasapi/index.ts';
import { patientRoutes } from './modules/patient/index.ts';
import { registerQueueGauges, requestQueueRoutes } from './modules/request-queue/index.ts';
import { signatureRoutes } from './modules/signature/index.ts';

export interface BuildAppOptions {
  /** The process logger (`createLogger`); silent when omitted. */
  readonly logger?: Logger;
  /**
   * The shared services, built once by the composition root (`src/main/server.ts`), which hands the same
   * ones to the DIMSE receiver; built here from `deps` when omitted (tests, benchmarks).
   */
  readonly services?: AppServices;
  /** Extra routes, registered like a module (the test harness uses this). */
  readonly extraRoutes?: (app: FastifyInstance, options: ModuleOptions) => void | Promise<void>;
}

export async function buildApp(deps: AppDeps, options: BuildAppOptions = {}): Promise<FastifyInstance> {
  const loggerInstance: FastifyBaseLogger | undefined = options.logger;
  // With TLS_CERT/TLS_KEY the server speaks HTTPS itself; the instance type stays the plain one (the
  // routes never touch the raw server).
  const tls = httpsServerOptions(deps.config);
  const app = Fastify({
    // Time limits on receiving a request (the body's minimum rate is the overload guard's).
    ...(tls === undefined
      ? { http: receiveTimeouts(deps.config) }
      : ({ https: { ...tls.https, ...receiveTimeouts(deps.config) } } as object)),
    requestTimeout: deps.config.requestTimeoutMs,
    ...(loggerInstance === undefined ? { logger: false } : { loggerInstance }),
    routerOptions: { caseSensitive: false, ignoreTrailingSlash: true, ignoreDuplicateSlashes: true },
    bodyLimit: deps.config.limits.jsonBodyBytes,
    trustProxy: deps.config.trustedProxies.length > 0 ? [...deps.config.trustedProxies] : false,
    requestIdHeader: false,
    genReqId: generateRequestId,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    clientErrorHandler: answerClientError,
  });
  trackPendingAnswers(app.server);
  installClientRequestIds(app);

  app.addHook('onSend', async (request, reply, payload) => {
    void reply.header('x-request-id', request.id);
    applySecurityHeaders(request, reply);
    if (!reply.hasHeader('cache-control')) void reply.header('cache-control', 'no-store');
    return payload;
  });
  const { rawBodyBytes, rawBodyLimitReason } = deps.config.limits;
  installErrorHandling(
    app,
    rawBodyLimitReason === undefined
      ? {}
      : { uploadLimitNote: `Uploads are limited to ${rawBodyBytes} bytes: ${rawBodyLimitReason}.` },
  );
  installOverloadGuard(app, {
    maxConcurrent: deps.config.maxConcurrentHeavyRequests,
    queueTimeoutMs: deps.config.heavyQueueTimeoutMs,
    maxPerClient: deps.config.maxRequestsPerClient,
    receiveRate: {
      timeoutMs: deps.config.bodyTimeoutMs,
      minBytesPerSecond: deps.config.bodyMinBytesPerSecond,
    },
  });
  // One audit row per answer of an audited route: a write's committed before the answer leaves, a
  // read's within AUDIT_FLUSH_MS after it unless AUDIT_READS=durable (modules/audit).
  const services = options.services ?? createAppServices(deps);
  installAuditTrail(app, deps, services.auditTrail);

  // Before any route: the OpenAPI collector and the request metrics hook see every route registered after.
  const moduleOptions: ModuleOptions = {
    deps,
    basicAuth: markGuards(createBasicAuthGuard(deps)),
    uploadMemory: createUploadMemory(deps.config.limits.uploadMemoryBytes),
  };
  installSpoolCleanup(app);
  // The DIMSE SCP of the same process loads its data sets under this budget too.
  app.decorate('uploadMemory', moduleOptions.uploadMemory);
  installOpenApi(app);
  await installMetrics(app, deps, moduleOptions.basicAuth, [
    registerQueueGauges,
    auditSinkGauges(app.auditSink),
    registerDicomReceiveMetrics,
    registerDicomParseMetrics,
  ]);

  installHealthRoutes(app, deps.database, () => app.auditSink?.refusal() !== undefined);

  await app.register(patientRoutes, { ...moduleOptions, patients: services.patients });
  await app.register(signatureRoutes, moduleOptions);
  await app.register(attachmentRoutes, { ...moduleOptions, attachments: services.attachments });
  await app.register(requestQueueRoutes, { ...moduleOptions, intake: services.intake });
  await app.register(dicomWebRoutes, { ...moduleOptions, intake: services.intake });
  await app.register(pasapiRoutes, moduleOptions);
  if (deps.config.console)
    await app.register(consoleRoutes, {
      ...moduleOptions,
      attachments: services.attachments,
      patients: services.patients,
      auditTrail: services.auditTrail,
      logger: options.logger ?? createLogger('silent'),
    });
  if (options.extraRoutes !== undefined) {
    const extra = options.extraRoutes;
    await app.register(async (scope) => {
      // Test-only routes stay out of the OpenAPI document.
      scope.addHook('onRoute', (route) => {
        route.config = { ...route.config, openapi: false };
      });
      await extra(scope, moduleOptions);
    });
  }
  return app;
}

/**
 * Node's limits on receiving a request: headers within `HEADERS_TIMEOUT_MS`, the whole request within
 * `REQUEST_TIMEOUT_MS` (408 and the connection closed, through `answerClientError`). Node checks them
 * every `connectionsCheckingInterval` (30 s by default, which would let a slow client run 30 s over).
 */
function receiveTimeouts(config: Config): ServerOptions {
  return {
    headersTimeout: config.headersTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    connectionsCheckingInterval: Math.min(1000, Math.max(50, Math.floor(config.headersTimeoutMs / 4))),
  };
}
