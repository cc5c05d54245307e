import assert from 'node:assert/strict';
import path from 'node:path';
import { describe, it } from 'node:test';
import { Linter } from 'eslint';
import tseslint from 'typescript-eslint';
import { noUpwardImport } from '../scripts/eslint-layers.js';

// A small tree on disk (test/fixtures/layers): src/http below src/modules, one module with an index,
// an http file that re-exports the module's type and one that imports nothing of it.
const root = path.join(import.meta.dirname, 'fixtures/layers');
const layers = [
  { files: ['src/http/'], forbidden: ['src/modules/'], message: 'src/http is below the modules.' },
];

function lint(code: string): string[] {
  const linter = new Linter({ cwd: root });
  const messages = linter.verify(
    code,
    [
      {
        files: ['**/*.ts'],
        languageOptions: { parser: tseslint.parser },
        plugins: { local: { rules: { 'no-upward-import': noUpwardImport } } },
        rules: { 'local/no-upward-import': ['error', { layers }] },
      },
    ],
    { filename: path.join(root, 'src/http/checked.ts') },
  );
  return messages.map((m) => m.message);
}

describe('lint: local/no-upward-import', () => {
  it('reports a direct import of a higher layer', () => {
    assert.deepEqual(lint("import { x } from '../modules/user/index.ts';\nvoid x;\n"), [
      'src/http is below the modules. This import reaches src/modules/user/index.ts.',
    ]);
  });

  it('reports a type-only import', () => {
    assert.deepEqual(lint("import type { Authenticator } from '../modules/user/index.ts';\n"), [
      'src/http is below the modules. This import reaches src/modules/user/index.ts.',
    ]);
  });

  it('reports an import that reaches a higher layer through a re-export of its own layer', () => {
    assert.deepEqual(lint("import type { Authenticator } from './reexport.ts';\n"), [
      'src/http is below the modules. This import reaches src/http/reexport.ts -> src/modules/user/index.ts.',
    ]);
  });

  it('reports a re-export of a higher layer', () => {
    assert.equal(lint("export type { Authenticator } from '../modules/user/index.ts';\n").length, 1);
  });

  it('lets an import within the layer pass', () => {
    assert.deepEqual(lint("import { OWN } from './own.ts';\nvoid OWN;\n"), []);
  });
});
