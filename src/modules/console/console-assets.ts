/**
 * The console's static files, all served by the service itself (hospital networks have no internet):
 * its own style sheet and crop script, and Cropper.js from its npm package. Read once at start; each URL
 * carries a digest of the content, so a browser caches a file for good and a new version has a new URL.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';
import { isNotModified } from '../../http/binary-reply.ts';

interface Asset {
  readonly bytes: Buffer;
  readonly contentType: string;
  readonly etag: string;
  readonly version: string;
}

export interface ConsoleAssets {
  /** URLs of the files, by role, for the layout. */
  readonly urls: {
    readonly css: string;
    readonly icon: string;
    readonly cropperCss: string;
    readonly cropperJs: string;
    readonly cropJs: string;
  };
  /** Registers `GET assets/:name` on the console scope (prefix `/console`). */
  register(app: FastifyInstance): void;
}

const OWN_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'assets');
const require = createRequire(import.meta.url);

function load(file: string, contentType: string): Asset {
  const bytes = readFileSync(file);
  const digest = createHash('sha256').update(bytes).digest('base64url');
  return { bytes, contentType, etag: `"${digest}"`, version: digest.slice(0, 12) };
}

export function loadConsoleAssets(): ConsoleAssets {
  const files = new Map<string, Asset>([
    ['console.css', load(path.join(OWN_DIR, 'console.css'), 'text/css; charset=utf-8')],
    ['crop.js', load(path.join(OWN_DIR, 'crop.js'), 'text/javascript; charset=utf-8')],
    ['favicon.svg', load(path.join(OWN_DIR, 'favicon.svg'), 'image/svg+xml')],
    ['cropper.min.css', load(require.resolve('cropperjs/dist/cropper.min.css'), 'text/css; charset=utf-8')],
    [
      'cropper.min.js',
      load(require.resolve('cropperjs/dist/cropper.min.js'), 'text/javascript; charset=utf-8'),
    ],
  ]);
  const url = (name: string) => `/console/assets/${name}?v=${files.get(name)!.version}`;
  return {
    urls: {
      css: url('console.css'),
      icon: url('favicon.svg'),
      cropperCss: url('cropper.min.css'),
      cropperJs: url('cropper.min.js'),
      cropJs: url('crop.js'),
    },
    register(app) {
      app.get<{ Params: { name: string }; Querystring: { v?: string } }>(
        '/assets/:name',
        async (request, reply) => {
          const asset = files.get(request.params.name);
          if (asset === undefined) return reply.callNotFound();
          const isCurrent = request.query.v === asset.version;
          const validators = {
            etag: asset.etag,
            lastModified: undefined,
            cacheControl: isCurrent ? 'public, max-age=31536000, immutable' : 'no-cache',
          };
          void reply.header('etag', asset.etag).header('cache-control', validators.cacheControl);
          if (isNotModified(request, validators)) return reply.code(304).send();
          return reply.code(200).header('content-type', asset.contentType).send(asset.bytes);
        },
      );
    },
  };
}
