/**
 * `POST api/v1/sign/add`: open by design (signature pads post here directly), so it
 * carries its own abuse limits: a body limit, a per-IP rate limit, and strict reading of the body. The
 * plugin is encapsulated: its content-type parser and hooks apply to this endpoint only.
 */
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { AppError, DEFAULT_MESSAGES } from '../../errors.ts';
import type { ModuleOptions } from '../../http/module.ts';
import { createRateLimiter } from '../../http/rate-limit.ts';
import { sharedCountersFor } from '../../http/shared-counters.ts';
import { SIGN_ADD_DOC, SIGN_ADD_REFUSAL_DOC } from './signature.openapi.ts';
import { createBodyDecoder } from './body-decoder.ts';
import type { SignatureInput } from './signature-body.ts';
import type { SignatureService } from './signature.service.ts';
import { createSignatureService, MESSAGES } from './signature.service.ts';

/** The spec path, and the legacy un-prefixed path the original's crop screen posts to. */
export const SIGN_ADD_PATHS = ['/api/v1/sign/add', '/Api/sign/add'] as const;

const JSON_TYPE = 'application/json; charset=utf-8';

export const signatureRoutes: FastifyPluginAsync<ModuleOptions> = async (app, { deps }) => {
  const service = createSignatureService({ database: deps.database, files: deps.files });
  const decoder = createBodyDecoder();
  app.addHook('onClose', async () => decoder.close());
  const limiter = createRateLimiter(deps.config.signRateLimitPerMinute, 60_000, {
    shared: sharedCountersFor(deps),
    name: 'sign_add_ip',
  });
  const bodyLimit = deps.config.limits.signatureBodyBytes;

  // Every answer of this endpoint, errors included, allows any origin.
  app.addHook('onRequest', async (request, reply) => {
    void reply.header('access-control-allow-origin', '*');
    if (request.method !== 'POST') return;
    // The Content-Type is ignored, a malformed one too (Fastify would answer 415).
    if (request.headers['content-type'] !== undefined)
      request.headers['content-type'] = 'application/octet-stream';
    const waitSeconds = limiter.hit(request.ip);
    if (waitSeconds > 0)
      throw new AppError('too_many_requests', DEFAULT_MESSAGES.too_many_requests, {
        headers: { 'retry-after': String(waitSeconds) },
      });
  });
  app.addHook('onSend', async (_request, reply, payload) => {
    void reply.header('access-control-allow-origin', '*');
    return payload;
  });

  // The body is JSON whatever its Content-Type (the original ignored it too).
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(
    '*',
    { parseAs: 'buffer', bodyLimit },
    async (_request: FastifyRequest, body: Buffer) => {
      const input = await decoder.decode(body);
      if (input === undefined) throw new AppError('bad_request', DEFAULT_MESSAGES.bad_request);
      return input;
    },
  );

  for (const url of SIGN_ADD_PATHS) registerSignAdd(app, url, service, bodyLimit);
};

function registerSignAdd(app: FastifyInstance, url: string, service: SignatureService, bodyLimit: number) {
  const config = {
    doc: SIGN_ADD_DOC,
    audit: { action: 'signature.add', label: 'Signature import', kind: 'write' },
  } as const;
  app.post<{ Body: SignatureInput | undefined }>(url, { bodyLimit, config }, async (request, reply) => {
    if (request.body === undefined) throw new AppError('bad_request', DEFAULT_MESSAGES.bad_request);
    const outcome = await service.importSignature(request.body);
    request.audit = { targetType: 'signature_import_log', targetIds: [outcome.logId] };
    switch (outcome.kind) {
      case 'saved':
        request.log.info({ logId: outcome.logId }, 'signature saved');
        return sendJson(reply, 200, MESSAGES.saved);
      case 'invalid':
        request.log.info({ logId: outcome.logId }, 'signature refused');
        throw new AppError('validation_failed', outcome.message);
      case 'failed':
        request.log.warn({ logId: outcome.logId, errorClass: outcome.errorClass }, 'signature save failed');
        return sendJson(reply, 200, MESSAGES.failed);
    }
  });

  app.options(url, { config: { doc: SIGN_ADD_DOC } }, async (_request, reply) =>
    reply
      .code(204)
      .header('access-control-allow-methods', 'POST, OPTIONS')
      .header('access-control-allow-headers', 'Content-Type')
      .header('access-control-max-age', '600')
      .header('content-type', JSON_TYPE)
      .send(),
  );

  // As the original, sign/add keeps its documented 400 for other methods (not 405).
  app.route({
    method: ['GET', 'HEAD', 'PUT', 'DELETE', 'PATCH'],
    url,
    exposeHeadRoute: false,
    config: { doc: SIGN_ADD_REFUSAL_DOC },
    handler: async () => {
      throw new AppError('bad_request', DEFAULT_MESSAGES.bad_request);
    },
  });
}

function sendJson(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).header('content-type', JSON_TYPE).send(JSON.stringify(body));
}
