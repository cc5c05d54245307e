/**
 * ESLint rule `local/no-type-import-cycle`: an `import type` (or `export type ... from`) that closes an
 * import cycle. import-x/no-cycle follows runtime imports only, so it cannot see a cycle that a type
 * import closes; such a cycle changes no load order but still ties a lower file to a higher one (as
 * `deps.ts` -> a module's index -> its CLI -> another module -> `deps.ts` did). Runtime cycles are left
 * to import-x/no-cycle, so that each cycle is reported once.
 *
 * The graph is every relative `.ts` import and re-export of the project's files, found with TypeScript's
 * `preProcessFile` (a scan, no type-check), cached per file and modification time.
 */
import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

/** @type {Map<string, { mtimeMs: number, imports: string[] }>} */
const importCache = new Map();

/** The files that `file` imports or re-exports by a relative path, type imports included. */
export function importsOf(file) {
  let mtimeMs;
  try {
    mtimeMs = statSync(file).mtimeMs;
  } catch {
    return [];
  }
  const cached = importCache.get(file);
  if (cached?.mtimeMs === mtimeMs) return cached.imports;
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
  const imports = importedFiles
    .map(({ fileName }) => fileName)
    .filter((name) => name.startsWith('.') && name.endsWith('.ts'))
    .map((name) => path.resolve(path.dirname(file), name));
  importCache.set(file, { mtimeMs, imports });
  return imports;
}

/** The shortest chain of imports from `from` to `to` (both included), or undefined when there is none. */
function importChain(from, to) {
  const previous = new Map([[from, undefined]]);
  const queue = [from];
  for (let i = 0; i < queue.length; i++) {
    const file = queue[i];
    if (file === to) {
      const chain = [];
      for (let step = to; step !== undefined; step = previous.get(step)) chain.unshift(step);
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

function isTypeOnly(node) {
  if (node.importKind === 'type' || node.exportKind === 'type') return true;
  const specifiers = node.specifiers ?? [];
  return specifiers.length > 0 && specifiers.every((s) => s.importKind === 'type' || s.exportKind === 'type');
}

export const noTypeImportCycle = {
  meta: {
    type: 'problem',
    docs: { description: 'Disallow a type import that closes an import cycle' },
    schema: [],
    messages: { cycle: 'This type import closes an import cycle: {{chain}}.' },
  },
  create(context) {
    const file = context.filename;
    const check = (node) => {
      const source = node.source?.value;
      if (typeof source !== 'string' || !source.startsWith('.') || !isTypeOnly(node)) return;
      const chain = importChain(path.resolve(path.dirname(file), source), file);
      if (chain === undefined) return;
      const names = [file, ...chain].map((f) => path.relative(context.cwd, f));
      context.report({ node, messageId: 'cycle', data: { chain: names.join(' -> ') } });
    };
    return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check };
  },
};
