/**
 * ESLint rule `local/no-upward-import`: a file of a lower layer that reaches a higher one, by a runtime
 * import, an `import type`, or through any file it imports (an index that re-exports, a file that
 * imports the next). import-x/no-restricted-paths looks at the one import written in the file; this rule
 * follows the graph, so that a `deps.ts` between src/http and a module, or a re-export in an index, does
 * not hide the arrow. Hand-written because no published rule follows imports transitively for layers.
 *
 * Options: `layers`, each `{ files, forbidden, message }`, paths relative to the working directory: a
 * folder ends with `/`, anything else is one file. The graph is the one of local/no-type-import-cycle
 * (relative `.ts` imports and re-exports, type ones included).
 */
import path from 'node:path';
import { importsOf } from './eslint-type-import-cycle.js';

const isUnder = (file, place) => (place.endsWith('/') ? file.startsWith(place) : file === place);

/** The shortest chain of imports from `start` to a file under one of `places`, or undefined. */
function chainToAny(start, places, cwd) {
  const previous = new Map([[start, undefined]]);
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    const file = queue[i];
    const relative = path.relative(cwd, file).split(path.sep).join('/');
    if (places.some((place) => isUnder(relative, place))) {
      const chain = [];
      for (let step = file; step !== undefined; step = previous.get(step)) chain.unshift(step);
      return chain;
    }
    for (const next of importsOf(file)) {
      if (!previous.has(next)) {
        previous.set(next, file);
        queue.push(next);
      }
    }
  }
  return undefined;
}

export const noUpwardImport = {
  meta: {
    type: 'problem',
    docs: { description: 'Disallow an import that reaches a higher layer, directly or through other files' },
    schema: [
      {
        type: 'object',
        properties: {
          layers: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                files: { type: 'array', items: { type: 'string' } },
                forbidden: { type: 'array', items: { type: 'string' } },
                message: { type: 'string' },
              },
              required: ['files', 'forbidden', 'message'],
              additionalProperties: false,
            },
          },
        },
        additionalProperties: false,
      },
    ],
    messages: { upward: '{{message}} This import reaches {{chain}}.' },
  },
  create(context) {
    const cwd = context.cwd;
    const relative = path.relative(cwd, context.filename).split(path.sep).join('/');
    const layers = (context.options[0]?.layers ?? []).filter(
      (layer) =>
        layer.files.some((place) => isUnder(relative, place)) &&
        !layer.forbidden.some((place) => isUnder(relative, place)),
    );
    if (layers.length === 0) return {};
    const check = (node) => {
      const source = node.source?.value;
      if (typeof source !== 'string' || !source.startsWith('.')) return;
      const start = path.resolve(path.dirname(context.filename), source);
      for (const layer of layers) {
        const chain = chainToAny(start, layer.forbidden, cwd);
        if (chain === undefined) continue;
        const names = chain.map((f) => path.relative(cwd, f).split(path.sep).join('/'));
        context.report({
          node,
          messageId: 'upward',
          data: { message: layer.message, chain: names.join(' -> ') },
        });
      }
    };
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check };
  },
};

/** The project's layers, lowest first in each rule: what each lower place may never reach. */
export const PROJECT_LAYERS = [
  {
    files: [
      'src/config.ts',
      'src/config-table.ts',
      'src/errors.ts',
      'src/logger.ts',
      'src/deps.ts',
      'src/site-files/',
      'src/http/',
      'src/db/',
      'src/files/',
      'src/cli/',
    ],
    forbidden: ['src/modules/', 'src/main/', 'src/app.ts', 'src/app-services.ts'],
    message: 'Below the modules: pass what it needs in, or declare the shared type in the lower layer.',
  },
  {
    files: ['src/errors.ts', 'src/config.ts', 'src/site-files/'],
    forbidden: ['src/db/', 'src/http/'],
    message: 'Below the database and HTTP layers.',
  },
];
